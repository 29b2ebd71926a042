"""``streamer dump`` of a real bundled warehouse: the directory is an archive the archive's own
verifier and Apache-avro-based reader accept, offsets 0..n-1, chained, ending in the bootstrap's
marker and PROGRESS, and its events are the bootstrap ``streamer bootstrap`` would publish."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import fastavro
import pytest
from click.testing import CliRunner

from streamer.archive.dump import copy_data, data_copy_path, dump_cmd, dump_records
from streamer.archive.manifest import ArchiveError
from streamer.archive.reading import read_archive, verified_records
from streamer.errors import StreamerError
from streamer.events.codec import EventDeserializer
from streamer.events.model import (
    BootstrapKind,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    Event,
    EventType,
    FileRef,
    ProgressPayload,
    Source,
)
from streamer.source.bootstrap import RecordLimits, enrich_records, records, snapshot
from streamer.source.enrich import EnrichSettings
from streamer.source.policy import PolicySet
from streamer.source.policy_record import policy_record
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


def test_a_dump_is_a_chained_archive_of_the_bootstrap(tmp_path: Path) -> None:
    url = _warehouse(tmp_path)
    out = _dump(url, tmp_path / "dump")
    store, manifest = read_archive(str(tmp_path / "dump"))
    assert len(manifest.files) >= 2 and f"{manifest.records} records" in out
    decode = EventDeserializer(check_envelope=False)
    events: list[Event] = []
    offsets: list[int] = []
    before = None
    for entry in manifest.files:
        with open(tmp_path / "dump" / entry.file, "rb") as f:  # Avro files any reader takes
            assert [r["offset"] for r in fastavro.reader(f)] == list(range(entry.first_offset,  # type: ignore[index, call-overload]
                                                                             entry.last_offset + 1))
        for record in verified_records(store, manifest, before, entry, decode):
            offsets.append(record.offset)
            events.append(decode(record.value))
        before = entry
    assert offsets == list(range(len(events)))
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
    assert ref.uri == (tmp_path / "dump" / data_copy_path(src.as_uri())).as_uri() and ref.cm_uri is None
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
