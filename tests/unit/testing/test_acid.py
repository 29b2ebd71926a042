"""Transactional writes: invisible until COMMIT_TXN, all tables at once; aborted ones never."""

from __future__ import annotations

from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    AcidWritePayload,
    AllocWriteIdPayload,
    Column,
    CommitTxnPayload,
    CreateTablePayload,
    Event,
    EventType,
    FileRef,
    OpenTxnPayload,
    Payload,
    Source,
    StorageDescriptor,
    TableSnapshot,
    TxnWriteId,
)
from streamer.testing import History, Sample, check, table_key
from streamer.testing.checker import CUT, PHANTOM

ACID = {"transactional": "true", "transactional_properties": "default"}


def table(name: str) -> TableSnapshot:
    sd = StorageDescriptor(location=f"file:/wh/d.db/{name}", columns=[Column("id", "int")])
    return TableSnapshot(name=name, db="d", sd=sd, parameters=ACID)


def write(name: str, txn: int, write_id: int) -> AcidWrite:
    uri = f"file:/wh/d.db/{name}/delta_{write_id:07d}_{write_id:07d}/bucket_00000"
    return AcidWrite("d", name, write_id, [FileRef(uri, f"c{txn}")], table_snapshot=table(name))


def events() -> list[Event]:
    payloads: list[tuple[EventType, Payload]] = [
        (EventType.CREATE_TABLE, CreateTablePayload(table("a"))),
        (EventType.CREATE_TABLE, CreateTablePayload(table("b"))),
        (EventType.OPEN_TXN, OpenTxnPayload([7, 8])),
        (EventType.ALLOC_WRITE_ID, AllocWriteIdPayload("d", "a", [TxnWriteId(7, 1), TxnWriteId(8, 2)])),
        (EventType.ALLOC_WRITE_ID, AllocWriteIdPayload("d", "b", [TxnWriteId(7, 1)])),
        (EventType.ACID_WRITE, AcidWritePayload(7, write("a", 7, 1))),
        (EventType.ACID_WRITE, AcidWritePayload(7, write("b", 7, 1))),
        (EventType.ACID_WRITE, AcidWritePayload(8, write("a", 8, 2))),
        (EventType.COMMIT_TXN, CommitTxnPayload(7)),  # as in the log: writes only in ACID_WRITE events
        (EventType.ABORT_TXN, AbortTxnPayload(8, ["d"])),
    ]
    return [Event(Source("s", i, 100 + i), t, p, "d") for i, (t, p) in enumerate(payloads, 1)]


def test_writes_become_visible_at_commit_across_tables() -> None:
    h = History.build(events())
    a, b = table_key("d", "a"), table_key("d", "b")
    for e in (6, 7, 8):
        assert h.state_at(a, e) == h.state_at(a, 2)  # written, not committed: nothing visible
    committed = h.state_at(a, 9)
    assert committed is not None
    assert committed.partitions == (("", (("delta_0000001_0000001/bucket_00000", "c7"),)),)
    assert committed.write_ids == (1,)
    assert h.state_at(a, 10) == committed  # the abort changes nothing
    assert h.change_ids([a, b]) == [1, 2, 9]


def test_half_a_transaction_is_a_cut_violation_and_aborted_files_are_phantoms() -> None:
    h = History.build(events())
    a, b = table_key("d", "a"), table_key("d", "b")
    half = Sample("r", 200.0, {"d": 9}, {a: h.state_at(a, 9), b: h.state_at(b, 8)})
    assert CUT in check(h, [half]).by_check()
    assert check(h, [Sample("r", 200.0, {"d": 9}, {a: h.state_at(a, 9), b: h.state_at(b, 9)})]).ok

    committed = h.state_at(a, 9)
    assert committed is not None
    aborted_file = ("delta_0000002_0000002/bucket_00000", "c8")
    leaked = committed.__class__(
        committed.meta, (("", (*committed.partitions[0][1], aborted_file)),), committed.write_ids
    )
    report = check(h, [Sample("r", 200.0, {"d": 10}, {a: leaked})])
    assert [v.obj for v in report.violations if v.check == PHANTOM] == [a]
