"""Transactions open when a dump of a Hive 2.x source starts: wait for them, then fail or abort them.

As Hive's REPL DUMP does (``hive.repl.bootstrap.dump.open.txn.timeout``, default 1 h): the dump
waits until every transaction open at its start has committed or aborted, polling the metastore;
after ``timeout_s`` it fails naming them, or, with ``abort`` (opt-in), aborts them through the
metastore and says so in the log. The snapshot it returns is taken after the wait: transactions
opened meanwhile are open in it, so their files are never dumped (a later commit reaches targets
through the events after the dump).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from streamer.metastore.thrift import CatalogError, TxnSnapshot
from streamer.source.bootstrap import BootstrapError

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 3600.0
"""Hive's ``hive.repl.bootstrap.dump.open.txn.timeout`` default (1 h)."""


class OpenTransactionsError(BootstrapError):
    """Transactions open at the dump's start were still open after the timeout."""


@dataclass(frozen=True)
class OpenTxnPolicy:
    """How long a dump waits for transactions open at its start, and whether it then aborts them."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    abort: bool = False
    poll_s: float = 1.0


class TxnSource(Protocol):
    """The metastore's transaction calls a dump needs (``streamer.metastore.thrift.ThriftTxns``)."""

    def snapshot(self) -> TxnSnapshot: ...

    def abort(self, txn_ids: Iterable[int]) -> None: ...


def settled_snapshot(
    txns: TxnSource,
    policy: OpenTxnPolicy,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> TxnSnapshot:
    """A snapshot taken once no transaction open at the start is open any more (see the module doc)."""
    first = txns.snapshot()
    waiting = set(first.open)
    if not waiting:
        return first
    log.info("bootstrap: waiting up to %.0f s for %d open transactions to end: %s", policy.timeout_s,
             len(waiting), _ids(waiting))
    deadline = clock() + policy.timeout_s
    while True:
        snap = txns.snapshot()
        waiting &= snap.open
        if not waiting:
            return snap
        if clock() >= deadline:
            break
        sleep(min(policy.poll_s, max(0.0, deadline - clock())))
    if not policy.abort:
        raise OpenTransactionsError(
            f"transactions {_ids(waiting)} of the source metastore were still open after "
            f"{policy.timeout_s:.0f} s (--open-txn-timeout): a dump never copies an open transaction's "
            "files. Let them finish (or abort them on the source) and run the bootstrap again, give a "
            "longer --open-txn-timeout, or pass --abort-open-txns to abort them after the timeout"
        )
    log.warning("bootstrap: aborting transactions %s on the source metastore: still open after %.0f s "
                "(--abort-open-txns); their writers will fail", _ids(waiting), policy.timeout_s)
    for txn in sorted(waiting):
        try:
            txns.abort([txn])
        except CatalogError as exc:  # committed or aborted meanwhile: the next snapshot says which
            log.info("bootstrap: transaction %d could not be aborted (%s); it ended meanwhile?", txn, exc)
    snap = txns.snapshot()
    still = waiting & snap.open
    if still:
        raise OpenTransactionsError(
            f"transactions {_ids(still)} are still open after --abort-open-txns aborted them; check the "
            "source metastore's transaction tables and run the bootstrap again"
        )
    return snap


def _ids(ids: Iterable[int]) -> str:
    ordered = sorted(ids)
    shown = ", ".join(str(i) for i in ordered[:20])
    return shown + (f" and {len(ordered) - 20} more" if len(ordered) > 20 else "")
