"""INSERTs without files (Hive 2.3's INSERT OVERWRITE) resolved into a listing published as a replace."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import (
    Column,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    PartitionSnapshot,
    Source,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.hive.decode import decode_row
from streamer.hive.files import is_hidden, partition_name
from streamer.hive.notification import NotificationRow
from streamer.source.enrich import Enricher, EnrichSettings
from streamer.source.insert_files import (
    HmsLocator,
    InsertResolver,
    Lister,
    Located,
    as_replace,
    drop_vanished,
    locate,
    locator_for,
    with_snapshots,
)
from streamer.source.listing import list_files
from streamer.source.thrift_reader import ThriftNotificationReader
from tests import strategies as S

EVENT_TIME = 1_700_000_000
DAY = [Column("dt", "string")]


def _table(location: str = "file:///wh/s.db/t", keys: list[Column] | None = None, created: int = 100,
           **params: str) -> TableSnapshot:
    return TableSnapshot("t", "s", sd=StorageDescriptor(location=location), partition_keys=keys or [],
                         parameters=dict(params), create_time=created)


def _part(values: list[str], location: str | None, created: int = 200) -> PartitionSnapshot:
    return PartitionSnapshot(values, "s", "t", sd=StorageDescriptor(location=location), create_time=created)


def _p(event: Event) -> InsertPayload:
    payload = event.payload
    assert isinstance(payload, InsertPayload)
    return payload


def _insert(files: list[FileRef] | None = None, values: list[str] | None = None,
            table: TableSnapshot | None = None, partition: PartitionSnapshot | None = None) -> Event:
    payload = InsertPayload(table, partition, values or [], False, files or [])
    return Event(Source("src", 42, EVENT_TIME), EventType.INSERT, payload, db="s", table="t")


class FakeLocator:
    def __init__(self, table: TableSnapshot | None, partition: PartitionSnapshot | None = None) -> None:
        self.tables = [table]  # successive answers; the last one repeats
        self.partition_ = partition
        self.asked: list[tuple[str, ...]] = []
        self.closed = False

    def table(self, db: str, name: str) -> TableSnapshot | None:
        self.asked.append((db, name))
        return self.tables.pop(0) if len(self.tables) > 1 else self.tables[0]

    def partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        self.asked.append((db, table, *values))
        return self.partition_

    def close(self) -> None:
        self.closed = True


def _lister(files: dict[str, list[str]]) -> Lister:
    def lister(location: str | None, partition: str | None) -> list[FileRef]:
        return [FileRef(uri, size=7, partition=partition) for uri in files.get(location or "", [])]

    return lister


# --- the pure steps ---------------------------------------------------------------------------------


def test_locate_through_the_metastore_takes_the_partition_directory() -> None:
    table, part = _table(keys=DAY), _part(["1"], "file:///ext/dt=1")
    found = locate(_insert(values=["1"]), _p(_insert(values=["1"])), table, part, asked=True)
    assert found == Located(table, part, "file:///ext/dt=1", "dt=1")


def test_locate_without_a_partition_location_uses_the_table_location_and_the_name() -> None:
    table = _table(location="file:///wh/s.db/t/", keys=[Column("k", "string"), Column("z", "int")])
    event = _insert(values=["a/b", "1"], table=table)
    found = locate(event, _p(event), None, None, asked=False)
    assert isinstance(found, Located)
    assert found.location == "file:///wh/s.db/t/k=a%2Fb/z=1" and found.partition_name == "k=a%2Fb/z=1"


@pytest.mark.parametrize(
    ("message_table", "live", "why"),
    [
        (None, None, "table is gone"),
        (None, _table(created=EVENT_TIME + 1), "created after the event"),
        (_table(created=5), _table(created=6), "created after the event"),
    ],
)
def test_an_object_that_is_not_the_events_any_more_is_not_located(
    message_table: TableSnapshot | None, live: TableSnapshot | None, why: str
) -> None:
    event = _insert(table=message_table)
    found = locate(event, _p(event), live, None, asked=True)
    assert isinstance(found, str) and why in found


def test_a_partition_gone_or_created_again_is_not_located() -> None:
    event = _insert(values=["1"])
    table = _table(keys=DAY)
    gone = locate(event, _p(event), table, None, asked=True)
    again = locate(event, _p(event), table, _part(["1"], None, created=EVENT_TIME + 5), asked=True)
    assert "gone" in str(gone) and "created again" in str(again)
    same_second = locate(event, _p(event), table, _part(["1"], None, created=EVENT_TIME), asked=True)
    assert isinstance(same_second, Located)


def test_without_a_metastore_a_message_without_snapshot_cannot_be_located() -> None:
    event = _insert()
    assert "--hms-uri" in str(locate(event, _p(event), None, None, asked=False))


def test_as_replace_and_with_snapshots() -> None:
    table, part = _table(keys=DAY), _part(["1"], "file:///wh/s.db/t/dt=1")
    found = Located(table, part, "file:///wh/s.db/t/dt=1", "dt=1")
    listing = [FileRef("file:///wh/s.db/t/dt=1/b", size=3), FileRef("file:///wh/s.db/t/dt=1/a", size=4)]
    out = as_replace(_insert(values=["1"]), found, listing)
    p = out.payload
    assert isinstance(p, InsertPayload) and p.replace and p.table == table and p.partition == part
    assert [(f.uri, f.partition, f.size) for f in p.files] == [
        ("file:///wh/s.db/t/dt=1/a", "dt=1", None), ("file:///wh/s.db/t/dt=1/b", "dt=1", None)]
    assert (out.source, out.db, out.table) == (Source("src", 42, EVENT_TIME), "s", "t")
    assert p.partition_values == ["1"]

    mine = _table(location="file:///elsewhere")
    event = _insert(files=[FileRef("f")], values=["1"], table=mine)
    filled = with_snapshots(event, found).payload
    assert isinstance(filled, InsertPayload)
    assert (filled.table, filled.partition) == (mine, part)
    assert (filled.files, filled.replace) == ([FileRef("f")], False)


def test_drop_vanished_keeps_the_files_that_were_read() -> None:
    event = _insert(files=[FileRef("a", checksum="x"), FileRef("b")])
    assert _p(drop_vanished(event)).files == [FileRef("a", checksum="x")]
    whole = _insert(files=[FileRef("a", checksum="x")])
    assert drop_vanished(whole) is whole


# --- the resolver -----------------------------------------------------------------------------------


def test_a_file_less_insert_becomes_a_replace_by_the_listing_of_its_partition() -> None:
    table, part = _table(keys=DAY), _part(["1"], "file:///wh/s.db/t/dt=1")
    locator = FakeLocator(table, part)
    resolver = InsertResolver(locator, _lister({"file:///wh/s.db/t/dt=1": ["file:///wh/s.db/t/dt=1/p0"]}))
    out, listed = resolver(_insert(values=["1"]))
    p = out.payload
    assert listed and isinstance(p, InsertPayload) and p.replace
    assert p.files == [FileRef("file:///wh/s.db/t/dt=1/p0", partition="dt=1")]
    assert locator.asked == [("s", "t"), ("s", "t", "1")]
    resolver.close()
    assert locator.closed


def test_an_insert_with_files_gets_the_snapshots_its_message_lacks_and_keeps_its_files() -> None:
    table = _table()
    resolver = InsertResolver(FakeLocator(table), _lister({}))
    event = _insert(files=[FileRef("file:///wh/s.db/t/new")])
    out, listed = resolver(event)
    assert not listed
    assert out.payload == dataclasses.replace(_p(event), table=table)


def test_an_insert_with_files_into_a_partition_dropped_since_gets_its_tables_snapshot() -> None:
    """Spark's ``INSERT INTO t PARTITION (dt='7')`` then ``ALTER TABLE t DROP PARTITION (dt='7')``
    before the agent reads the INSERT: its table still says where its files may be read from (a
    target then finds them gone and voids them with the drop); a file-less one is not listed."""
    table = _table(keys=DAY)
    resolver = InsertResolver(FakeLocator(table, None), _lister({}))
    event = _insert(files=[FileRef("file:///wh/s.db/t/dt=7/f")], values=["7"])
    out, listed = resolver(event)
    assert not listed
    assert out.payload == dataclasses.replace(_p(event), table=table)
    file_less = _insert(values=["7"])
    assert resolver(file_less) == (file_less, False)
    external = dataclasses.replace(table, table_type="EXTERNAL_TABLE")  # its partition's own location
    assert InsertResolver(FakeLocator(external, None), _lister({}))(event) == (event, False)


@pytest.mark.parametrize(
    "live",
    [None, _table(created=EVENT_TIME + 60), _table(transactional="true"),
     dataclasses.replace(_table(), table_type="VIRTUAL_VIEW")],
    ids=["dropped", "created-again", "transactional", "view"],
)
def test_what_is_not_listed_goes_out_as_it_came(live: TableSnapshot | None) -> None:
    resolver = InsertResolver(FakeLocator(live), _lister({"file:///wh/s.db/t": ["file:///wh/s.db/t/x"]}))
    event = _insert()
    assert resolver(event) == (event, False)


def test_an_empty_listing_is_a_state_only_while_the_object_is_still_there() -> None:
    table = _table()
    # the directory is missing but the metastore, asked again, still has the table there: it is empty
    kept = InsertResolver(FakeLocator(table), _lister({}), exists=lambda _: False)
    out, listed = kept(_insert())
    assert listed and _p(out).replace and _p(out).files == []
    # renamed between the look-up and the listing: the directory went with it
    moved = FakeLocator(table)
    moved.tables = [table, None]
    resolver = InsertResolver(moved, _lister({}), exists=lambda _: False)
    event = _insert()
    assert resolver(event) == (event, False)
    # without a metastore an empty existing directory is the state, a missing one says nothing
    message = _insert(table=table)
    assert _p(InsertResolver(None, _lister({}), exists=lambda _: True)(message)[0]).replace
    assert InsertResolver(None, _lister({}), exists=lambda _: False)(message) == (message, False)


def test_the_metastore_of_a_thrift_reader_is_the_locator() -> None:
    reader = ThriftNotificationReader("thrift://hms.example:9083", timeout_seconds=7)
    locator = locator_for(reader)
    assert isinstance(locator, HmsLocator) and (locator.uri, locator.timeout_s) == (reader.uri, 7)
    assert locator_for(None) is None
    locator.close()  # never connected: nothing to close


# --- properties -------------------------------------------------------------------------------------


class Refusing:
    def table(self, db: str, name: str) -> TableSnapshot | None:
        raise AssertionError("no look-up expected")

    def partition(self, db: str, table: str, values: list[str]) -> PartitionSnapshot | None:
        raise AssertionError("no look-up expected")

    def close(self) -> None:
        pass


def _refusing_lister(location: str | None, partition: str | None) -> list[FileRef]:
    raise AssertionError("no listing expected")


@given(S.events([t for t in EventType if t is not EventType.INSERT]))
def test_other_events_pass_untouched(event: Event) -> None:
    assert InsertResolver(Refusing(), _refusing_lister)(event) == (event, False)


@given(S.events([EventType.INSERT]), S.table_snapshots(), S.partition_snapshots(),
       st.lists(S.file_refs(), min_size=1, max_size=3))
def test_an_insert_naming_its_files_and_its_objects_passes_untouched(
    event: Event, table: TableSnapshot, part: PartitionSnapshot, files: list[FileRef]
) -> None:
    p = event.payload
    assert isinstance(p, InsertPayload)
    event = dataclasses.replace(event, payload=dataclasses.replace(
        p, table=table, partition=part if p.partition_values else p.partition, files=files))
    assert InsertResolver(Refusing(), _refusing_lister)(event) == (event, False)


@given(
    S.events([EventType.INSERT]),
    S.table_snapshots(),
    st.lists(st.text(alphabet="abz01=_.-", min_size=1, max_size=6), max_size=4, unique=True),
    st.none() | st.integers(min_value=0, max_value=2**40),
)
def test_a_file_less_insert_is_replaced_by_exactly_the_listing(
    event: Event, table: TableSnapshot, names: list[str], created: int | None
) -> None:
    p = event.payload
    assert isinstance(p, InsertPayload)
    keys = [Column(f"k{i}", "string") for i in range(len(p.partition_values))]
    live = dataclasses.replace(table, partition_keys=keys, create_time=created,
                               parameters={}, table_type="MANAGED_TABLE",
                               sd=dataclasses.replace(table.sd, location="hdfs://nn/wh/t"))
    part = _part(list(p.partition_values), "hdfs://nn/wh/t/part", created=0) if keys else None
    event = dataclasses.replace(event, payload=dataclasses.replace(p, table=None, partition=None, files=[]))
    where = "hdfs://nn/wh/t/part" if keys else "hdfs://nn/wh/t"
    listing = {where: [f"{where}/{n}" for n in names]}
    out, listed = InsertResolver(FakeLocator(live, part), _lister(listing), exists=lambda _: True)(event)
    if created is not None and created > event.source.event_time:
        assert (out, listed) == (event, False)  # a newer table under the name: not the event's
        return
    q = out.payload
    assert listed and isinstance(q, InsertPayload) and q.replace and q.table == live and q.partition == part
    assert [f.uri for f in q.files] == sorted(listing[where])
    name = partition_name([k.name for k in keys], list(p.partition_values)) if keys else None
    assert {f.partition for f in q.files} <= {name} and q.partition_values == p.partition_values
    assert dataclasses.replace(out, payload=p) == dataclasses.replace(event, payload=p)  # envelope as it was


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(alphabet="ab_.-=1", min_size=1, max_size=5), min_size=0, max_size=6, unique=True))
def test_the_listing_skips_what_hives_readers_skip(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "t"
        (root / ".hive-staging_1").mkdir(parents=True)
        (root / ".hive-staging_1" / "part-0").write_bytes(b"staged")
        for n in names:
            if n not in (".", ".."):
                (root / n).write_bytes(n.encode())
        table = _table(location=f"file:{root}")  # Hadoop's file:/path spelling
        out, listed = InsertResolver(FakeLocator(table), list_files)(_insert())
        got = sorted(Path(f.uri.removeprefix("file://")).name for f in _p(out).files)
        assert listed and got == sorted(n for n in names if n not in (".", "..") and not is_hidden(n))


# --- through the enricher: a Hive 2.3 INSERT OVERWRITE as Spark SQL logs it -------------------------


def _spark_overwrite(dt: str) -> NotificationRow:
    message = {"server": "", "servicePrincipal": "", "db": "s", "table": "t", "timestamp": EVENT_TIME,
               "files": [], "partKeyVals": {"dt": dt}}
    return NotificationRow(42, EVENT_TIME, "INSERT", json.dumps(message), "json-0.2", "s", "t")


def test_a_spark_overwrite_is_published_as_a_checksummed_replace(tmp_path: Path) -> None:
    directory = tmp_path / "t" / "dt=1"
    directory.mkdir(parents=True)
    (directory / "part-00000-c000").write_bytes(b"new rows")
    (directory / "_SUCCESS").write_bytes(b"")
    (directory / ".part-00000-c000.crc").write_bytes(b"crc")
    table = _table(location=f"file:{tmp_path / 't'}", keys=DAY)
    part = _part(["1"], f"file:{directory}")
    enricher = Enricher(EnrichSettings(cmroot="file:/cm"), reader=None, locator=FakeLocator(table, part))  # type: ignore[arg-type]
    event = decode_row(_spark_overwrite("1"), "src")
    assert event.payload == InsertPayload(None, None, ["1"], False, [])  # an empty append, as it reads
    out = enricher(event).payload
    digest = hashlib.sha256(b"new rows").hexdigest()
    assert isinstance(out, InsertPayload) and out.replace and (out.table, out.partition) == (table, part)
    name = "part-00000-c000"
    assert [(f.uri, f.checksum, f.checksum_algorithm, f.size, f.partition, f.cm_uri) for f in out.files] == [
        (f"file://{directory}/{name}", digest, "sha256", 8, "dt=1", f"file:/cm/{name}_{digest}")]


def test_files_vanishing_between_listing_and_reading_are_listed_again(tmp_path: Path) -> None:
    (tmp_path / "kept").write_bytes(b"k")
    listings = [["gone", "kept"], ["kept"]]

    def lister(location: str | None, partition: str | None) -> list[FileRef]:
        return [FileRef(f"file://{tmp_path}/{n}") for n in listings.pop(0)]

    enricher = Enricher(EnrichSettings(), reader=None, locator=FakeLocator(_table(location=f"file://{tmp_path}")))  # type: ignore[arg-type]
    enricher.inserts.lister = lister
    out = enricher(_insert()).payload
    assert [f.uri for f in out.files] == [f"file://{tmp_path}/kept"] and not listings  # type: ignore[union-attr]


def test_without_a_metastore_a_hive_2_3_overwrite_is_published_marked_unlocated_never_as_an_append(
    caplog: pytest.LogCaptureFixture,
) -> None:
    event = decode_row(_spark_overwrite("1"), "src")
    out = Enricher(EnrichSettings(), reader=None)(event)  # type: ignore[arg-type]
    assert out.payload == dataclasses.replace(_p(event), unlocated=True)
    assert "cannot be located" in caplog.text and "unlocated" in caplog.text and "event 42" in caplog.text


def test_values_that_fit_no_partition_of_the_table_mark_the_insert_unlocated() -> None:
    event = _insert(values=["1", "2"])
    out, listed = InsertResolver(FakeLocator(_table(keys=DAY)), _lister({}))(event)
    assert not listed and _p(out).unlocated and not _p(out).files


def test_an_object_a_later_event_dropped_goes_out_as_it_came_not_unlocated() -> None:
    event = _insert(values=["1"])  # the later DROP_PARTITION brings the replica to the source's state
    assert InsertResolver(FakeLocator(_table(keys=DAY), None), _lister({}))(event) == (event, False)
    assert InsertResolver(FakeLocator(None), _lister({}))(_insert()) == (_insert(), False)


def test_the_database_of_a_sql_reader_is_the_locator() -> None:
    from streamer.source.reader import SqlNotificationReader
    from streamer.source.sql_locator import SqlLocator

    locator = locator_for(SqlNotificationReader("postgresql://hive@db.example/metastore"))
    assert isinstance(locator, SqlLocator) and locator.url == "postgresql://hive@db.example/metastore"
    locator.close()  # never connected: nothing to close


def test_an_agent_locates_through_its_reader_unless_given_a_metastore(tmp_path: Path) -> None:
    """``source run --notification-db`` locates in the database's tables; with ``--hms-uri`` too, over
    Thrift (commands.py passes it)."""
    from streamer.source.agent import AgentConfig, SourceAgent
    from streamer.source.reader import SqlNotificationReader
    from streamer.source.sql_locator import SqlLocator

    config = AgentConfig(source_id="s", kafka={"bootstrap.servers": "127.0.0.1:1"})
    url = f"sqlite:///{tmp_path / 'none.db'}"
    alone = SourceAgent(config, SqlNotificationReader(url))
    thrift = HmsLocator("thrift://hms.example:9083")
    both = SourceAgent(config, SqlNotificationReader(url), locator=thrift)
    try:
        assert isinstance(alone.enricher.inserts.locator, SqlLocator)
        assert both.enricher.inserts.locator is thrift
    finally:
        alone.close()
        both.close()
