"""``streamer dump`` of a real bundled warehouse: the directory is an archive the archive's own
verifier and Apache-avro-based reader accept, offsets 0..n-1, chained, ending in the bootstrap's
marker and PROGRESS, and its events are the bootstrap ``streamer bootstrap`` would publish; then the
log's events after the bootstrap, as the agent's ``Preparer`` makes them, and a PROGRESS record at the
last id the dump read."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import fastavro
import pytest
from click.testing import CliRunner

from streamer.archive.dump import (
    DumpSettings,
    copy_data,
    data_copy_path,
    dump_cmd,
    dump_records,
    resource_copy_path,
    run_dump,
)
from streamer.archive.manifest import ArchiveError
from streamer.archive.reading import read_archive, verified_records
from streamer.errors import StreamerError
from streamer.events.codec import EventDeserializer, EventSerializer
from streamer.events.model import (
    BootstrapKind,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    CreateFunctionPayload,
    DropTablePayload,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    ProgressPayload,
    ResourceUri,
    Source,
)
from streamer.source.bootstrap import RecordLimits, enrich_records, records, snapshot
from streamer.source.enrich import Enricher, EnrichSettings
from streamer.source.policy import PolicySet
from streamer.source.policy_record import policy_record
from streamer.source.prepare import Prepared, Preparer
from streamer.source.reader import SqlNotificationReader
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.warehouse import Warehouse
from streamer.warehouse.workload import Workload

SOURCE = "s"


def _warehouse(tmp: Path) -> str:
    url = str(tmp / "m.sqlite")
    wh = Warehouse.open(url, root=tmp / "wh", cmroot=tmp / "cm", source_id=SOURCE)
    try:
        Workload(wh, seed=5, txn_share=0.2).run(60)
    finally:
        wh.close()
    return url


def _dump(url: str, to: Path, *extra: str) -> str:
    result = CliRunner().invoke(dump_cmd, ["--source-id", SOURCE, "--warehouse", url, "--to", str(to),
                                           "--records-per-file", "2", *extra])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.output
    return result.output


def _read_dump(to: Path) -> list[Event]:
    """The dump's events, read with its verifier, its files with fastavro; offsets 0..n-1."""
    store, manifest = read_archive(str(to))
    decode = EventDeserializer(check_envelope=False)
    events: list[Event] = []
    offsets: list[int] = []
    before = None
    for entry in manifest.files:
        with open(to / entry.file, "rb") as f:  # Avro files any reader takes
            assert [r["offset"] for r in fastavro.reader(f)] == list(range(entry.first_offset,  # type: ignore[index, call-overload]
                                                                             entry.last_offset + 1))
        for record in verified_records(store, manifest, before, entry, decode):
            offsets.append(record.offset)
            events.append(decode(record.value))
        before = entry
    assert offsets == list(range(len(events))) and manifest.records == len(events)
    return events


def test_a_dump_is_a_chained_archive_of_the_bootstrap(tmp_path: Path) -> None:
    url = _warehouse(tmp_path)
    out = _dump(url, tmp_path / "dump")
    _, manifest = read_archive(str(tmp_path / "dump"))
    assert len(manifest.files) >= 2 and f"{manifest.records} records" in out
    events = _read_dump(tmp_path / "dump")
    assert [e.prev_event_id for e in events] == [None, *(e.event_id for e in events[:-1])]
    assert events[-2].event_type is EventType.BOOTSTRAP_END and events[-1].event_type is EventType.PROGRESS
    marker, progress = events[-2].payload, events[-1].payload
    assert isinstance(marker, BootstrapMarkerPayload) and isinstance(progress, ProgressPayload)
    assert marker.records == len(events) - 2 and progress.last_event_id == marker.bootstrap_id

    # the same objects a bootstrap of the (unchanged) warehouse makes, apart from the chain and times
    wh = Warehouse.open(url, source_id=SOURCE)
    reader = SqlNotificationReader(url)
    try:
        enrich = EnrichSettings()
        scope = PolicySet.parse(["*"])
        state = snapshot(WarehouseCatalog(wh), reader, scope, SOURCE, enrich=enrich)
        recs = records(state, SOURCE, policy=policy_record(scope), limits=RecordLimits(partitions=200))
        expected = enrich_records(recs, enrich)
    finally:
        reader.close()
        wh.close()

    def plain(e: Event) -> Event:
        return dataclasses.replace(e, prev_event_id=None, ts_ms=None,
                                   source=dataclasses.replace(e.source, event_time=0))

    assert [plain(e) for e in events[:-1]] == [plain(e) for e in expected]


def test_a_dump_refuses_a_directory_holding_an_archive(tmp_path: Path) -> None:
    url = _warehouse(tmp_path)
    _dump(url, tmp_path / "dump")
    with pytest.raises(ArchiveError, match="holds an archive already"):
        _dump(url, tmp_path / "dump")


def test_dump_records_needs_the_marker_last() -> None:
    event = Event(Source(SOURCE, 1, 0), EventType.BOOTSTRAP_END, BootstrapMarkerPayload(1, 0))
    assert [r.offset for r in dump_records([event], source_id=SOURCE, topic="t", policy="*")] == [0, 1]
    with pytest.raises(ValueError, match="BOOTSTRAP_END"):
        dump_records([], source_id=SOURCE, topic="t", policy="*")


def _prepared(event_id: int, prev: int | None) -> Prepared:
    event = Event(Source(SOURCE, event_id, 0), EventType.DROP_TABLE, DropTablePayload(), db="db",
                  table=f"t{event_id}", prev_event_id=prev)
    return Prepared(event_id, "DROP_TABLE", b"db", b"v", event=event)


def test_dump_records_chain_the_events_after_the_bootstrap_and_progress_claims_the_last_id() -> None:
    marker = Event(Source(SOURCE, 5, 0), EventType.BOOTSTRAP_END, BootstrapMarkerPayload(5, 0))
    filtered = Prepared(8, "DROP_TABLE", None, None, passed="policy")
    out = list(dump_records([marker], [_prepared(6, 5), _prepared(7, 6), filtered], source_id=SOURCE,
                            topic="t", policy="*", head=9))
    assert [r.offset for r in out] == [0, 1, 2, 3]
    assert [(r.event_id, r.prev_event_id) for r in out] == [(5, None), (6, 5), (7, 6), (8, 7)]
    assert out[1].value == b"v" and out[1].key == b"db"  # the agent's encoding, as it would publish it
    progress = EventDeserializer(check_envelope=False)(out[-1].value)
    assert progress.event_type is EventType.PROGRESS and progress.prev_event_id == 7
    assert progress.payload == ProgressPayload(8, 9, "*")  # past the filtered event, never past the dump

    only_filtered = list(dump_records([marker], [filtered], source_id=SOURCE, topic="t", policy="*"))
    assert [(r.event_id, r.prev_event_id) for r in only_filtered] == [(5, None), (8, 5)]
    with pytest.raises(ValueError, match="event 7 names 5 before it; the dump's last record is event 6"):
        list(dump_records([marker], [_prepared(6, 5), _prepared(7, 5)], source_id=SOURCE, topic="t",
                          policy="*"))


def test_a_dump_holds_the_log_s_events_after_its_bootstrap_as_the_agent_prepares_them(tmp_path: Path) -> None:
    url = _warehouse(tmp_path)
    wh = Warehouse.open(url, source_id=SOURCE)
    reader = SqlNotificationReader(url)
    scope = PolicySet.parse(["*"])
    written: list[int] = []

    def write_more(bootstrap_id: int) -> None:  # between the bootstrap's read and the head's
        assert bootstrap_id == wh.current_event_id()
        Workload(wh, seed=11, txn_share=0.2).run(25)
        written.append(wh.current_event_id())

    try:
        for to, bounded in ((tmp_path / "dump", False), (tmp_path / "until", True)):
            bound = wh.current_event_id() + 20 if bounded else None  # inside what write_more writes
            settings = DumpSettings(SOURCE, str(to), scope, EnrichSettings(), records_per_file=7,
                                    until_event=bound)
            summary = run_dump(settings, reader, WarehouseCatalog(wh), after_bootstrap=write_more)
            events = _read_dump(to)
            marker_at = next(i for i, e in enumerate(events) if e.event_type is EventType.BOOTSTRAP_END)
            bootstrap_id = events[marker_at].event_id
            head = written[-1] if bound is None else bound
            assert summary.bootstrap_id == bootstrap_id and summary.last_event_id == head
            after = events[marker_at + 1:]
            assert [e.prev_event_id for e in events] == [None, *(e.event_id for e in events[:-1])]
            progress = after[-1].payload
            assert isinstance(progress, ProgressPayload) and progress.last_event_id == head
            assert progress.source_head_event_id == written[-1]

            # the events the agent's Preparer makes of the same rows, chained from the bootstrap's id
            preparer = Preparer(Enricher(EnrichSettings(), reader), EventSerializer(), "t")
            rows = [r for r in wh.notifications(after=bootstrap_id) if r.event_id <= head]
            assert rows and rows[-1].event_id == head
            prepared, failure = preparer.prepare(rows, source_id=SOURCE, catalog="hive", policy=scope,
                                                 prev=bootstrap_id, now_ms=0)
            assert failure is None
            expected = [p.event for p in prepared if p.event is not None]

            def plain(e: Event) -> Event:
                return dataclasses.replace(e, ts_ms=None)

            assert [plain(e) for e in after[:-1]] == [plain(e) for e in expected] and len(expected) >= 20
    finally:
        reader.close()
        wh.close()


def test_until_event_before_the_bootstrap_is_refused(tmp_path: Path) -> None:
    url = _warehouse(tmp_path)
    with pytest.raises(StreamerError, match="--until-event 3 is before the bootstrap's event id"):
        _dump(url, tmp_path / "dump", "--until-event", "3")


def _file_record(uri: str, checksum: str | None, cm_uri: str | None = None) -> Event:
    ref = FileRef(uri, checksum, "sha256" if checksum else None, cm_uri=cm_uri)
    payload = BootstrapObjectPayload(9, 1, 1, BootstrapKind.TABLE, files=[ref])
    return Event(Source(SOURCE, 9, 0), EventType.BOOTSTRAP, payload, db="db", table="t")


def test_with_data_copies_verified_files_and_names_the_copies(tmp_path: Path) -> None:
    data = b"some,rows\n" * 100
    src = tmp_path / "src" / "part-0"
    src.parent.mkdir()
    src.write_bytes(data)
    good = hashlib.sha256(data).hexdigest()
    [copied] = copy_data([_file_record(src.as_uri(), good)], tmp_path / "dump")
    assert isinstance(copied.payload, BootstrapObjectPayload)
    [ref] = copied.payload.files
    assert ref.uri == (tmp_path / "dump" / data_copy_path(src.as_uri(), good)).as_uri() and ref.cm_uri is None
    assert ref.uri.endswith("/part-0") and Path(ref.uri.removeprefix("file://")).read_bytes() == data
    assert ref.checksum == good

    cm = tmp_path / "cm" / "part-0"  # the file gone at its uri: its change-manager copy is read
    cm.parent.mkdir()
    cm.write_bytes(data)
    gone = (tmp_path / "src" / "gone").as_uri()
    [copied] = copy_data([_file_record(gone, good, cm.as_uri())], tmp_path / "dump2")
    assert isinstance(copied.payload, BootstrapObjectPayload)
    assert Path(copied.payload.files[0].uri.removeprefix("file://")).read_bytes() == data

    with pytest.raises(StreamerError, match=r"event 9 \(.* db\.t\): file .*part-0: its bytes have checksum"):
        copy_data([_file_record(src.as_uri(), "0" * 64)], tmp_path / "dump3")
    assert not [p for p in (tmp_path / "dump3").rglob("*") if p.is_file()]  # nothing half-copied kept
    with pytest.raises(StreamerError, match="has no checksum"):
        copy_data([_file_record(src.as_uri(), None)], tmp_path / "dump4")
    with pytest.raises(StreamerError, match="not found on the source"):
        copy_data([_file_record(gone, good)], tmp_path / "dump5")


def test_with_data_copies_a_function_s_resources(tmp_path: Path) -> None:
    jar = tmp_path / "lib" / "udfs.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"PK\x03\x04 a jar")
    uri = f"file:{jar}"  # as Hive writes it: one slash
    fn = FunctionSnapshot("f", "db", "com.example.F", resource_uris=[ResourceUri("JAR", uri)])
    create = Event(Source(SOURCE, 12, 0), EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), db="db")
    [copied] = copy_data([create], tmp_path / "dump")
    assert isinstance(copied.payload, CreateFunctionPayload)
    [resource] = copied.payload.function.resource_uris
    assert resource.uri == (tmp_path / "dump" / resource_copy_path(uri)).as_uri()
    assert resource.uri.endswith("/udfs.jar")
    assert Path(resource.uri.removeprefix("file://")).read_bytes() == jar.read_bytes()
    jar.unlink()
    with pytest.raises(StreamerError, match=r"event 12 \(CREATE_FUNCTION db\): function resource .*udfs.jar"):
        copy_data([create], tmp_path / "dump2")


@pytest.mark.parametrize("flags, says", [
    ([], "give exactly one source"),
    (["--warehouse", "w.sqlite", "--hms-uri", "thrift://h:9083"], "give exactly one source"),
    (["--warehouse", "w.sqlite", "--notification-db", "n.sqlite"], "--notification-db goes with --hms-uri"),
])
def test_dump_takes_one_source(tmp_path: Path, flags: list[str], says: str) -> None:
    result = CliRunner().invoke(dump_cmd, ["--source-id", SOURCE, "--to", str(tmp_path / "d"), *flags])
    assert result.exit_code == 2 and says in result.output
