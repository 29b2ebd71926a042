"""A table followed through its renames and its drop in the log, and an INSERT OVERWRITE of a table
renamed before the agent published it listed under the new name."""

from __future__ import annotations

import dataclasses

from streamer.events.model import (
    AlterTablePayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    Payload,
    Source,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive.encode import encode_event
from streamer.hive.notification import NotificationRow
from streamer.source.insert_files import InsertResolver
from streamer.source.renames import Renames, fate_in
from tests.unit.source.memory_log import MemoryLog
from tests.unit.source.test_insert_files import FakeLocator, _lister, _p

T0 = 1_700_000_000


def _t(db: str, name: str, created: int = 100) -> TableSnapshot:
    sd = StorageDescriptor(location=f"file:///wh/{db}.db/{name}")
    return TableSnapshot(name, db, sd=sd, create_time=created)


def _row(event_id: int, event_type: EventType, payload: Payload, db: str, table: str) -> NotificationRow:
    return encode_event(Event(Source("s", event_id, T0 + event_id), event_type, payload, db=db, table=table))


def _rename(event_id: int, old: tuple[str, str], new: tuple[str, str]) -> NotificationRow:
    return _row(event_id, EventType.ALTER_TABLE, AlterTablePayload(_t(*old), _t(*new)), *new)


def test_a_table_is_followed_through_its_renames_to_its_current_name() -> None:
    log = MemoryLog([
        _rename(5, ("s", "t"), ("s", "u")),
        _row(6, EventType.ALTER_TABLE, AlterTablePayload(_t("s", "other"), _t("s", "other")), "s", "other"),
        _rename(7, ("s", "u"), ("arch", "T_2024")),
    ])
    renames = Renames(log)
    assert renames.current(4, "S", "t") == ("arch", "t_2024")
    assert renames.current(5, "s", "u") == ("arch", "t_2024")
    assert renames.current(7, "arch", "t_2024") == ("arch", "t_2024")  # nothing after: as it is
    assert renames.current(4, "s", "other") == ("s", "other")


def test_a_dropped_table_has_no_current_name_and_its_fate_is_remembered() -> None:
    rows = [_row(i, EventType.ALTER_TABLE, AlterTablePayload(_t("s", "x"), _t("s", "x")), "s", "x")
            for i in range(10, 1200)]
    log = MemoryLog([*rows, _row(1500, EventType.DROP_TABLE, DropTablePayload(_t("s", "t")), "s", "t")])
    renames = Renames(log)
    assert renames.current(3, "s", "t") is None
    reads = log.reads
    assert renames.current(900, "s", "t") is None and log.reads == reads  # the same fate: not read again
    assert fate_in(log.rows, ("s", "t")) == (1500, None)


def test_an_overwrite_of_a_table_renamed_before_publishing_is_listed_under_the_new_name() -> None:
    log = MemoryLog([_rename(50, ("s", "t"), ("s", "u"))])
    renamed = _t("s", "u")
    locator = FakeLocator(None)
    locator.table = lambda db, name: renamed if (db, name) == ("s", "u") else None  # type: ignore[method-assign]
    listing = {"file:///wh/s.db/u": ["file:///wh/s.db/u/part-0"]}
    resolver = InsertResolver(locator, _lister(listing), renames=Renames(log).current)
    event = Event(Source("s", 42, T0 + 42), EventType.INSERT, InsertPayload(None, None, [], False, []),
                  db="s", table="t")
    out, listed = resolver(event)
    p = _p(out)
    assert listed and p.replace and [f.uri for f in p.files] == ["file:///wh/s.db/u/part-0"]
    # the event's names (the target applies it before the rename), the location the files are under
    assert p.table == dataclasses.replace(renamed, name="t")
    # a table dropped after the event: published as it came, the drop converges the replica
    gone = InsertResolver(FakeLocator(None), _lister(listing), renames=Renames(MemoryLog([])).current)
    assert gone(event) == (event, False)
    # files named by the event: never followed (its files are the event's, its snapshot unknown)
    with_files = dataclasses.replace(event, payload=InsertPayload(None, None, [], False, [FileRef("f")]))
    assert resolver(with_files) == (with_files, False)


def test_a_table_renamed_away_whose_name_was_taken_again_is_found_under_its_new_name() -> None:
    log = MemoryLog([_rename(50, ("s", "t"), ("s", "u"))])
    tables = {("s", "u"): _t("s", "u", created=100), ("s", "t"): _t("s", "t", created=T0 + 60)}
    locator = FakeLocator(None)
    locator.table = lambda db, name: tables.get((db, name))  # type: ignore[method-assign]
    listing = {"file:///wh/s.db/u": ["file:///wh/s.db/u/part-0"], "file:///wh/s.db/t": ["file:///wh/s.db/t/new"]}
    event = Event(Source("s", 42, T0 + 42), EventType.INSERT, InsertPayload(None, None, [], False, []),
                  db="s", table="t")
    out, listed = InsertResolver(locator, _lister(listing), renames=Renames(log).current)(event)
    assert listed and [f.uri for f in _p(out).files] == ["file:///wh/s.db/u/part-0"]
    # without the log to follow it, the new table under the name is not the event's: not listed
    assert InsertResolver(locator, _lister(listing))(event) == (event, False)
