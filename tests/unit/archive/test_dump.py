"""``streamer dump`` of a real bundled warehouse: the directory is an archive the archive's own
verifier and Apache-avro-based reader accept, offsets 0..n-1, chained, ending in the bootstrap's
marker and PROGRESS, and its events are the bootstrap ``streamer bootstrap`` would publish."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import fastavro
import pytest
from click.testing import CliRunner

from streamer.archive.dump import dump_cmd, dump_records
from streamer.archive.manifest import ArchiveError
from streamer.archive.reading import read_archive, verified_records
from streamer.events.codec import EventDeserializer
from streamer.events.model import BootstrapMarkerPayload, Event, EventType, ProgressPayload, Source
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
