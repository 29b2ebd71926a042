"""The agent's memory of the tables the log showed (streamer.source.table_memory), and the INSERTs
it locates when the metastore no longer has their table (pure; hypothesis against a plain dict)."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import (
    AlterTablePayload,
    CreateTablePayload,
    DropTablePayload,
    Event,
    FileRef,
    InsertPayload,
    TableSnapshot,
)
from streamer.source.insert_files import InsertResolver
from streamer.source.table_memory import TableMemory
from tests.unit.target import builders as b

NAMES = ["t", "u", "v"]


def _snap(name: str, version: int) -> TableSnapshot:
    return b.table("s", name, location=f"file:///wh/s.db/{name}-{version}")


@st.composite
def table_events(draw: st.DrawFn) -> list[Event]:
    out: list[Event] = []
    for event_id in range(1, draw(st.integers(0, 40)) + 1):
        name = draw(st.sampled_from(NAMES))
        kind = draw(st.sampled_from(["create", "alter", "rename", "drop", "other"]))
        if kind == "create":
            out.append(b.create_table(event_id, _snap(name, event_id)))
        elif kind == "alter":
            out.append(b.alter_table(event_id, _snap(name, 0), _snap(name, event_id)))
        elif kind == "rename":
            new = draw(st.sampled_from(NAMES))
            out.append(b.alter_table(event_id, _snap(name, 0), _snap(new, event_id)))
        elif kind == "drop":
            out.append(b.drop_table(event_id, _snap(name, 0)))
        else:
            out.append(b.create_db(event_id, "s"))
    return out


@given(table_events(), st.integers(1, 4))
def test_memory_is_the_last_snapshot_each_name_was_given_for_the_most_recent_tables(
    events: list[Event], capacity: int,
) -> None:
    memory = TableMemory(capacity)
    model: list[tuple[str, TableSnapshot]] = []  # (name, snapshot), least recently given first

    def give(snap: TableSnapshot) -> None:
        model[:] = [kv for kv in model if kv[0] != snap.name][-(capacity - 1):] if capacity > 1 else []
        model.append((snap.name, snap))

    for e in events:
        memory.see(e)
        p = e.payload
        if isinstance(p, CreateTablePayload):
            give(p.table)
        elif isinstance(p, AlterTablePayload):
            model[:] = [kv for kv in model if kv[0] != p.before.name]
            give(p.after)
        elif isinstance(p, DropTablePayload):
            model[:] = [kv for kv in model if kv[0] != e.table]
    assert {n: memory.get("S", n.upper()) for n in NAMES} == {n: dict(model).get(n) for n in NAMES}


class _Gone:
    """A metastore that no longer has the table (dropped right after the write)."""

    def table(self, db: str, name: str) -> TableSnapshot | None:
        return None

    def partition(self, db: str, table: str, values: list[str]) -> None:
        return None

    def close(self) -> None:
        pass


def test_an_insert_whose_table_was_dropped_before_the_agent_read_it_gets_the_logged_table() -> None:
    """``CREATE TABLE t ...; INSERT INTO t ...; DROP TABLE t`` faster than the agent reads: Hive 2.3's
    INSERT carries no snapshot and the metastore has none; the log's last one locates its files."""
    created, altered = _snap("t", 1), dataclasses.replace(_snap("t", 1), parameters={"x": "1"})
    written = b.insert(4, created, [FileRef("file:///wh/s.db/t-1/part-0")])
    assert isinstance(written.payload, InsertPayload)
    written = dataclasses.replace(written, payload=dataclasses.replace(written.payload, table=None))
    for locator in (_Gone(), None):
        resolver = InsertResolver(locator, lambda loc, part: [])
        for e in (b.create_table(2, created), b.alter_table(3, created, altered)):
            assert resolver(e) == (e, False)
        out, listed = resolver(written)
        assert not listed and isinstance(out.payload, InsertPayload)
        assert out.payload == dataclasses.replace(written.payload, table=altered)
        resolver(b.drop_table(5, created))
        assert resolver(written) == (written, False)  # dropped and not made again: nothing known


def test_a_table_seen_at_or_after_the_asking_event_is_not_its_table() -> None:
    """After a failed publish the agent reads the log again from an earlier event: a table it saw
    created later (dropped and made again after the INSERT) is not the INSERT's table."""
    first, again = _snap("t", 1), _snap("t", 103)
    memory = TableMemory()
    memory.see(b.create_table(1, first))
    assert memory.get("s", "t", before=101) == first
    memory.see(b.drop_table(102, first))
    memory.see(b.create_table(103, again))
    assert memory.get("s", "t", before=101) is None  # re-reading event 101
    assert memory.get("s", "t", before=104) == again


def test_an_external_tables_partition_is_never_guessed_from_its_table() -> None:
    """A target puts an external partition's files at the partition's own location: with the
    partition gone, the table's snapshot alone would send them elsewhere, so none is given."""
    keyed = b.table("s", "t", ("dt",), location="file:///wh/s.db/t-1")
    external = dataclasses.replace(keyed, table_type="EXTERNAL_TABLE")
    written = b.insert(4, external, [FileRef("file:///wh/s.db/t-1/custom7/part-0")], values=["7"])
    assert isinstance(written.payload, InsertPayload)
    unlocated = dataclasses.replace(written.payload, table=None, partition=None)  # as Hive 2.3 logs it
    written = dataclasses.replace(written, payload=unlocated)
    resolver = InsertResolver(None, lambda loc, part: [])
    resolver(b.create_table(2, external))
    assert resolver(written) == (written, False)
    managed = dataclasses.replace(external, table_type="MANAGED_TABLE")
    resolver(b.alter_table(3, external, managed))
    out, _ = resolver(written)
    assert isinstance(out.payload, InsertPayload) and out.payload.table == managed
