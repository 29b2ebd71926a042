"""Waiting for the transactions open at a dump's start (``open_txns.settled_snapshot``), on a scripted
metastore and a fake clock: they end in time, they do not (fail naming them), or they are aborted."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from streamer.metastore.thrift import TxnSnapshot
from streamer.source.open_txns import OpenTransactionsError, OpenTxnPolicy, settled_snapshot


class Metastore:
    """Open transactions that end at given times; aborts recorded."""

    def __init__(self, hwm: int, ends: dict[int, float]) -> None:
        self.hwm, self.ends, self.now = hwm, dict(ends), 0.0
        self.aborted: set[int] = set()
        self.starts: dict[int, float] = {}

    def snapshot(self) -> TxnSnapshot:
        still = {t for t, end in self.ends.items()
                 if self.starts.get(t, 0.0) <= self.now < end and t not in self.aborted}
        return TxnSnapshot(self.hwm, frozenset(still), frozenset(self.aborted))

    def abort(self, txn_ids: Iterable[int]) -> None:
        self.aborted.update(txn_ids)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run(ms: Metastore, policy: OpenTxnPolicy) -> TxnSnapshot:
    return settled_snapshot(ms, policy, clock=lambda: ms.now, sleep=ms.sleep)


def test_no_open_transaction_no_wait() -> None:
    ms = Metastore(5, {})
    assert run(ms, OpenTxnPolicy(10)) == TxnSnapshot(5)
    assert ms.now == 0


def test_waits_until_the_open_transactions_end() -> None:
    ms = Metastore(7, {6: 3.0, 7: 5.5})
    got = run(ms, OpenTxnPolicy(60, poll_s=1))
    assert got.open == frozenset() and 5.5 <= ms.now < 7


def test_fails_naming_the_transactions_still_open_after_the_timeout() -> None:
    ms = Metastore(9, {4: 2.0, 8: 1e9, 9: 1e9})
    with pytest.raises(OpenTransactionsError) as err:
        run(ms, OpenTxnPolicy(30, poll_s=1))
    text = str(err.value)
    assert "transactions 8, 9" in text and "--open-txn-timeout" in text and "--abort-open-txns" in text
    assert ms.aborted == set() and 30 <= ms.now < 32


def test_aborts_them_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    ms = Metastore(9, {8: 1e9})
    got = run(ms, OpenTxnPolicy(5, abort=True, poll_s=1))
    assert ms.aborted == {8} and got.aborted == {8} and got.open == frozenset()
    assert any("aborting transactions 8" in r.getMessage() for r in caplog.records)


def test_transactions_opened_while_waiting_are_not_waited_for() -> None:
    ms = Metastore(9, {8: 2.0})
    ms.ends[10], ms.starts[10] = 1e9, 1.0  # opens during the wait: open in the snapshot, so left out
    got = run(ms, OpenTxnPolicy(60, poll_s=1))
    assert got.open == {10} and ms.now < 4
