"""The agent's watch of tables whose writers log nothing (``streamer.source.watch``): which tables, what
changed, what is checksummed again, which listings wait for the next cycle. Real files in a temporary
directory, the metastore's in-memory stand-in (``MemoryCatalog``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from click.testing import CliRunner

from streamer.events.model import (
    Column,
    DatabaseSnapshot,
    Event,
    InsertPayload,
    PartitionSnapshot,
    SerDe,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive.notification import NotificationRow
from streamer.metastore.memory import MemoryCatalog
from streamer.source.enrich import EnrichSettings, FsspecInspector
from streamer.source.policy import PolicySet
from streamer.source.watch import WATCH_SECONDS, Watcher, watch_reason

PARQUET = SerDe(serialization_lib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")
TEXT = SerDe(serialization_lib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe")


def table(name: str, location: Path, *, params: dict[str, str] | None = None, serde: SerDe = PARQUET,
          keys: tuple[str, ...] = (), table_type: str = "MANAGED_TABLE") -> TableSnapshot:
    return TableSnapshot(name, "db", table_type, StorageDescriptor(location=location.as_uri(), serde=serde),
                         [Column(k, "string") for k in keys], params or {})


DATASOURCE = {"spark.sql.sources.provider": "parquet"}
SPARK_MADE = {"spark.sql.create.version": "4.0.0"}


def test_which_tables_are_watched(tmp_path: Path) -> None:
    assert watch_reason(table("a", tmp_path, params=DATASOURCE))
    assert watch_reason(table("b", tmp_path, params=SPARK_MADE))
    assert watch_reason(table("c", tmp_path, params={"spark.sql.sources.schema.numParts": "1"}))
    assert watch_reason(table("d", tmp_path, params={"spark.sql.sources.provider": "hive"})) is None
    assert watch_reason(table("e", tmp_path, params=SPARK_MADE, serde=TEXT)) is None  # Hive's writer
    assert watch_reason(table("f", tmp_path)) is None  # a Parquet table Hive made: its writes log INSERTs
    assert watch_reason(table("g", tmp_path, params=DATASOURCE, table_type="EXTERNAL_TABLE")) is None
    assert watch_reason(table("h", tmp_path, params={**DATASOURCE, "transactional": "true"})) is None


class CountingInspector(FsspecInspector):
    def __init__(self) -> None:
        self.read: list[str] = []

    def sha256(self, uri: str) -> str | None:
        self.read.append(uri)
        return super().sha256(uri)


def setup(tmp_path: Path) -> tuple[MemoryCatalog, Watcher, CountingInspector]:
    catalog = MemoryCatalog()
    catalog.create_database(DatabaseSnapshot("db"))
    catalog.create_table(table("ds", tmp_path / "ds", params=DATASOURCE))
    catalog.create_table(table("part", tmp_path / "part", params=DATASOURCE, keys=("dt",)))
    catalog.create_table(table("hive", tmp_path / "hive", serde=TEXT))
    catalog.add_partitions("db", "part", [PartitionSnapshot(["1"], sd=StorageDescriptor(
        location=(tmp_path / "part" / "dt=1").as_uri()))])
    for d in ("ds", "part/dt=1", "hive"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "ds" / "a.parquet").write_bytes(b"a")
    (tmp_path / "ds" / "_SUCCESS").write_bytes(b"")
    (tmp_path / "part" / "dt=1" / "b.parquet").write_bytes(b"bb")
    inspector = CountingInspector()
    return catalog, Watcher(catalog, PolicySet.parse(["db"]), EnrichSettings(), files=inspector), inspector


def payload(event: Event) -> InsertPayload:
    assert isinstance(event.payload, InsertPayload)
    return event.payload


def row(event_id: int, table: str | None) -> NotificationRow:
    return NotificationRow(event_id, 0, "ALTER_TABLE", "{}", db_name="db", table_name=table)


def test_a_start_publishes_every_watched_directory_then_only_what_changed(tmp_path: Path) -> None:
    _, watcher, inspector = setup(tmp_path)
    changes = watcher.scan()
    assert sorted(c.dir.shown for c in changes) == ["db.ds", "db.part partition dt=1"]
    events, ready = watcher.events(changes, source_id="s", after=41, now=1000.0)
    assert [e.event_id for e in events] == [41, 41] and len(ready) == 2
    first, second = (payload(e) for e in events)
    assert first.replace and first.watch and first.table is not None
    [ref] = first.files
    assert ref.checksum == hashlib.sha256(b"a").hexdigest() and ref.size == 1  # _SUCCESS is hidden
    assert second.partition_values == ["1"] and second.partition is not None
    numbers = [first.watch, second.watch]
    assert numbers == sorted(set(numbers))
    watcher.commit(ready)
    assert watcher.scan() == []  # nothing changed: nothing listed as changed, nothing read
    (tmp_path / "ds" / "c.parquet").write_bytes(b"ccc")
    inspector.read.clear()
    [change] = watcher.scan()
    events, _ = watcher.events([change], source_id="s", after=42, now=1001.0)
    assert [f.uri.rsplit("/", 1)[1] for f in payload(events[0]).files] == ["a.parquet", "c.parquet"]
    assert [u.rsplit("/", 1)[1] for u in inspector.read] == ["c.parquet"]  # a.parquet's checksum kept
    assert payload(events[0]).watch > numbers[-1]


def test_a_listing_of_a_table_an_event_named_meanwhile_waits_for_the_next_cycle(tmp_path: Path) -> None:
    catalog, watcher, _ = setup(tmp_path)
    watcher.begin()
    changes = watcher.scan()
    watcher.note([row(7, "PART")])  # published while the listings were made: an ALTER, a new partition
    kept = watcher.untouched(changes)
    assert [c.dir.shown for c in kept] == ["db.ds"]
    watcher.commit(kept)
    catalog.add_partitions("db", "part", [PartitionSnapshot(["2"])])  # read again: the event named it
    (tmp_path / "part" / "dt=2").mkdir()
    (tmp_path / "part" / "dt=2" / "x.parquet").write_bytes(b"x")
    watcher.begin()
    shown = sorted(c.dir.shown for c in watcher.untouched(watcher.scan()))
    assert shown == ["db.part partition dt=1", "db.part partition dt=2"]


def test_a_new_table_is_found_through_the_event_that_names_it(tmp_path: Path) -> None:
    catalog, watcher, _ = setup(tmp_path)
    watcher.commit(watcher.scan())
    catalog.create_table(table("late", tmp_path / "late", params=SPARK_MADE))
    assert watcher.scan() == []  # the metastore is read again only where the log says
    watcher.note([row(8, "late")])
    [change] = watcher.scan()
    assert change.dir.shown == "db.late" and change.entries == []  # an empty table: an empty replace


def test_a_file_that_vanishes_before_it_is_read_leaves_its_directory_for_the_next_cycle(
    tmp_path: Path,
) -> None:
    _, watcher, _ = setup(tmp_path)
    changes = watcher.scan()
    os.remove(tmp_path / "ds" / "a.parquet")
    events, ready = watcher.events(changes, source_id="s", after=1, now=1.0)
    assert [c.dir.shown for c in ready] == ["db.part partition dt=1"] and len(events) == 1


def test_tables_outside_the_policy_are_not_watched(tmp_path: Path) -> None:
    catalog, _, _ = setup(tmp_path)
    watcher = Watcher(catalog, PolicySet.parse(["db.['part']"]), EnrichSettings())
    assert [c.dir.shown for c in watcher.scan()] == ["db.part partition dt=1"]


def test_source_run_documents_the_default() -> None:
    from streamer.source.commands import source

    out = CliRunner().invoke(source, ["run", "--help"]).output
    assert "--watch-seconds" in out and f"default: {WATCH_SECONDS}" in out
