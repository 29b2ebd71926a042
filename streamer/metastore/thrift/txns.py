"""Hive 2.x transactions over Thrift: the metastore's open and aborted transactions, and abort.

A bootstrap of a Hive 2.x source reads which transactions a reader must not see (``TxnSnapshot``,
from ``get_open_txns_info``: the high water mark and every transaction still OPEN or ABORTED) and
may abort the ones that stay open too long (``abort_txn``). In Hive 2.x a transactional table's
write ids are these transaction ids (``delta_<min>_<max>``, ``base_<N>``). ``open``/``commit`` are
what a writer calls; tests play Hive's writer with them.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass

from hmsclient.genthrift.hive_metastore import ttypes as tt

from streamer.metastore.thrift.connection import ThriftConnection

TXNS = "metastore transactions"


@dataclass(frozen=True)
class TxnSnapshot:
    """What a reader may see at one instant: ids up to ``high_water_mark`` except ``open``/``aborted``."""

    high_water_mark: int
    open: frozenset[int] = frozenset()
    aborted: frozenset[int] = frozenset()

    def valid(self, txn: int) -> bool:
        """Whether ``txn`` committed by this instant (Hive's ``ValidReadTxnList.isTxnValid``)."""
        return txn <= self.high_water_mark and txn not in self.open and txn not in self.aborted

    @property
    def min_open(self) -> int | None:
        return min(self.open) if self.open else None


class ThriftTxns:
    """The transaction calls of a metastore connection (one ``ThriftConnection``, not owned)."""

    def __init__(self, conn: ThriftConnection) -> None:
        self.conn = conn

    def snapshot(self) -> TxnSnapshot:
        """Open and aborted transactions with the high water mark, from one ``get_open_txns_info``."""
        info = self.conn.call(TXNS, lambda c: c.get_open_txns_info())
        txns = list(info.open_txns or [])
        return TxnSnapshot(
            int(info.txn_high_water_mark),
            frozenset(int(t.id) for t in txns if t.state == tt.TxnState.OPEN),
            frozenset(int(t.id) for t in txns if t.state == tt.TxnState.ABORTED),
        )

    def open_and_aborted(self) -> tuple[int, frozenset[int]]:
        """``get_open_txns``: the high water mark and the ids a reader must skip (open or aborted),
        as Hive's readers build their ``ValidReadTxnList`` from it."""
        got = self.conn.call(TXNS, lambda c: c.get_open_txns())
        return int(got.txn_high_water_mark), frozenset(int(t) for t in (got.open_txns or ()))

    def abort(self, txn_ids: Iterable[int]) -> None:
        for txn in txn_ids:
            request = tt.AbortTxnRequest(txnid=txn)
            self.conn.call(f"transaction {txn}", lambda c, r=request: c.abort_txn(r))  # type: ignore[misc]

    def open(self, count: int = 1, user: str = "streamer") -> list[int]:
        request = tt.OpenTxnRequest(num_txns=count, user=user, hostname=socket.gethostname())
        got = self.conn.call(TXNS, lambda c: c.open_txns(request))
        return [int(t) for t in got.txn_ids]

    def commit(self, txn: int) -> None:
        self.conn.call(f"transaction {txn}", lambda c: c.commit_txn(tt.CommitTxnRequest(txnid=txn)))
