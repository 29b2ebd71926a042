"""Bootstrap records from a real bundled warehouse, through the codec, the planner and the applier
(in-memory catalog, real files): the target equals the source, resumes, and refuses existing dbs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streamer.events.codec import EventDeserializer, EventSerializer
from streamer.events.model import (
    BootstrapKind,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    Column,
    ColumnStatistic,
    Event,
    EventType,
    PartitionStatistics,
    Source,
)
from streamer.events.schemas import WriterSchema, schemas_dir
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.source.bootstrap import RecordLimits, enrich_records, records, snapshot
from streamer.source.enrich import EnrichSettings
from streamer.source.policy import PolicySet
from streamer.source.reader import SqlNotificationReader
from streamer.source.warehouse_catalog import WarehouseCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import StepKind, plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from streamer.warehouse import Warehouse
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from streamer.warehouse.workload import COLUMNS, Workload

SOURCE = "s"


def _records(tmp: Path, policy: str = "*") -> tuple[Warehouse, list[Event]]:
    wh = Warehouse.open(str(tmp / "m.sqlite"), root=tmp / "wh", cmroot=tmp / "cm", source_id=SOURCE)
    Workload(wh, seed=3, txn_share=0.2).run(120)
    wh.create_table(wh.databases()[0], "many", COLUMNS, [Column("dt", "string")])
    wh.add_partitions(wh.databases()[0], "many", [{"dt": str(i)} for i in range(7)])
    for day in ("0", "4", "6"):  # partition column statistics in the TABLE record and in PARTITIONS ones
        wh.insert(wh.databases()[0], "many", [{"id": int(day), "name": "x", "amount": 1.5, "ok": True}],
                  {"dt": day})
        wh.update_column_statistics(wh.databases()[0], "many", {"dt": day})
    reader = SqlNotificationReader(str(tmp / "m.sqlite"))
    settings = EnrichSettings(checksum_algorithm=CHECKSUM_ALGORITHM, cmroot=str(tmp / "cm"))
    try:
        state = snapshot(WarehouseCatalog(wh), reader, PolicySet.parse([policy]), SOURCE, enrich=settings)
    finally:
        reader.close()
    recs = records(state, SOURCE, policy=policy, limits=RecordLimits(partitions=3, files=4))
    serialize, deserialize = EventSerializer(), EventDeserializer()
    return wh, [deserialize(serialize(e)) for e in enrich_records(recs, settings)]


def _applier(tmp: Path, catalog: MemoryCatalog, **kw: bool) -> tuple[Applier, TargetState]:
    state = TargetState(tmp / "state")
    paths = TargetPaths(str(tmp / "twh"), str(tmp / "ext"))
    applier = Applier(catalog, FileCopier(max_workers=2), paths, SOURCE, state=state, **kw)
    return applier, state


def _run(applier: Applier, state: TargetState, events: list[Event]) -> list[int]:
    report = run_plan(applier, plan(events, applier.load_progress(), state.halts()), state)
    assert not report.halted, report.halted
    return report.applied


def test_target_equals_source_after_a_bootstrap(tmp_path: Path) -> None:
    wh, recs = _records(tmp_path)
    marker = recs[-1].payload
    assert isinstance(marker, BootstrapMarkerPayload) and marker.records == len(recs) - 1
    kinds = [e.payload.kind for e in recs if isinstance(e.payload, BootstrapObjectPayload)]
    assert kinds.count(BootstrapKind.PARTITIONS) > 1
    carried = [(p.kind, ps.values) for e in recs if isinstance(p := e.payload, BootstrapObjectPayload)
               for ps in p.partition_statistics]
    assert {k for k, _ in carried} == {BootstrapKind.TABLE, BootstrapKind.PARTITIONS}, carried
    stats_seen = 0
    catalog = MemoryCatalog()
    applier, state = _applier(tmp_path, catalog)
    steps = plan(recs, {}, set()).steps
    assert {s.kind for s in steps} == {StepKind.BOOTSTRAP} and len(steps) == len(recs)
    _run(applier, state, recs)
    for db in wh.databases():
        assert catalog.get_database(db).parameters[LAST_ID_PARAM] == str(marker.bootstrap_id)  # type: ignore[union-attr]
        assert sorted(catalog.list_tables(db)) == sorted(wh.tables(db))
        for name in wh.tables(db):
            src = wh.table(db, name)
            assert catalog.get_table(db, name).sd.columns == src.sd.columns  # type: ignore[union-attr]
            got = sorted(p.values for p in catalog.list_partitions(db, name))
            assert got == sorted(p.values for p in wh.partition_snapshots(db, name))
            if src.table_type == "VIRTUAL_VIEW":
                continue
            copied = {p.name for d in ("twh", "ext") for p in (tmp_path / d).rglob("*") if p.is_file()}
            assert {Path(f.uri).name for f in wh.files(db, name)} <= copied
            for part in wh.partition_snapshots(db, name):
                spec = {k.name: v for k, v in zip(src.partition_keys, part.values, strict=True)}
                want = wh.column_statistics(db, name, spec)  # ordered by column
                got = catalog.statistics.get((db, name, tuple(part.values)), {})
                assert [got[c] for c in sorted(got)] == want, (name, spec)
                stats_seen += bool(want)
    assert stats_seen >= 3, "no partition column statistics were compared"
    # replaying the whole bootstrap changes nothing: the databases are at its id
    assert _run(applier, state, recs) == [marker.bootstrap_id]  # only the (idempotent) marker


def test_interrupted_bootstrap_resumes_after_the_last_finished_record(tmp_path: Path) -> None:
    wh, recs = _records(tmp_path)
    catalog = MemoryCatalog()
    applier, state = _applier(tmp_path, catalog)
    half = len(recs) // 2
    _run(applier, state, recs[:half])
    assert all(LAST_ID_PARAM not in catalog.get_database(db).parameters  # type: ignore[union-attr]
               for db in catalog.list_databases())
    calls: list[int] = []
    applier2, state2 = _applier(tmp_path, catalog)  # a restarted job: progress comes from the state dir
    original = catalog.create_table
    catalog.create_table = lambda t: (calls.append(1), original(t))[1]  # type: ignore[method-assign]
    _run(applier2, state2, recs)  # Kafka delivers everything again
    tables_after_half = sum(1 for e in recs[half:] if getattr(e.payload, "kind", "") == "TABLE")
    assert len(calls) == tables_after_half
    assert sorted(catalog.list_tables(wh.databases()[0])) == sorted(wh.tables(wh.databases()[0]))


def test_an_existing_database_is_refused_unless_allowed(tmp_path: Path) -> None:
    _, recs = _records(tmp_path)
    catalog = MemoryCatalog()
    applier, state = _applier(tmp_path, catalog)
    _run(applier, state, recs)
    later = [_with_id(e, e.event_id + 10) for e in recs]  # a second bootstrap of the same objects
    report = run_plan(applier, plan(later, applier.load_progress(), state.halts()), state)
    assert report.halted and "already exists" in next(iter(report.halted.values())).cause
    catalog2 = MemoryCatalog()
    applier2, state2 = _applier(tmp_path / "other", catalog2, allow_existing_db=True)
    _run(applier2, state2, recs)
    _run(applier2, state2, later)


def _with_id(event: Event, event_id: int) -> Event:
    payload = event.payload
    assert isinstance(payload, BootstrapObjectPayload | BootstrapMarkerPayload)
    return dataclasses.replace(
        event,
        source=dataclasses.replace(event.source, event_id=event_id),
        payload=dataclasses.replace(payload, bootstrap_id=event_id),
    )


@pytest.mark.parametrize("policy", ["`.*`.['t.*']"])
def test_policy_limits_the_tables(tmp_path: Path, policy: str) -> None:
    _, recs = _records(tmp_path, policy)
    payloads = [e.payload for e in recs if isinstance(e.payload, BootstrapObjectPayload)]
    names = {p.table.name for p in payloads if p.table}
    assert names and all(n.startswith("t") for n in names)


def test_target_progress_is_a_bar_on_a_terminal_and_a_log_line_otherwise(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import io
    import logging

    from streamer.events.model import BootstrapKind as Kind
    from streamer.target.apply import bootstrap as target_bootstrap

    def record(seq: int) -> BootstrapObjectPayload:
        return BootstrapObjectPayload(7, seq, 4, Kind.DATABASE)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    caplog.set_level(logging.INFO, logger="streamer.target.apply.bootstrap")
    monkeypatch.setattr("sys.stderr", io.StringIO())
    for seq in range(1, 5):
        target_bootstrap._report(record(seq))
    assert "bootstrap 7: 4/4 records applied (100%)" in caplog.text
    caplog.clear()
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    for seq in range(1, 5):
        target_bootstrap._report(record(seq))
    assert "records applied" not in caplog.text  # no log lines: a bar
    assert "bootstrap 7 records applied" in terminal.getvalue() and "4/4" in terminal.getvalue()


def _bootstrap_record(**fields: object) -> Event:
    payload = BootstrapObjectPayload(9, 1, 1, BootstrapKind.PARTITIONS, **fields)  # type: ignore[arg-type]
    return Event(Source(SOURCE, 9, 1), EventType.BOOTSTRAP, payload, db="d", table="t")


def test_partition_statistics_survive_the_wire() -> None:
    stats = [
        ColumnStatistic("id", "bigint", "LONG", num_nulls=0, num_distinct=3, low_value="1", high_value="9"),
        ColumnStatistic("ok", "boolean", "BOOLEAN", num_nulls=1, num_trues=2, num_falses=0),
    ]
    event = _bootstrap_record(partition_statistics=[PartitionStatistics(["2024", "eu"], stats),
                                                    PartitionStatistics(["2025", "us"])])
    assert EventDeserializer()(EventSerializer()(event)) == event


def test_records_of_writers_without_partition_statistics_still_read() -> None:
    """A bootstrap record written before the field existed (schema f7eaa76af1b22d40, kept in
    schemas/history/) decodes with no partition statistics."""
    old = WriterSchema.from_json((schemas_dir() / "history" / "f7eaa76af1b22d40.avsc").read_text())
    event = _bootstrap_record(statistics=[ColumnStatistic("id", "bigint", "LONG", num_nulls=0)])
    data = EventSerializer(schema=old)(event)
    assert data[2:10] == old.fingerprint
    decoded = EventDeserializer()(data)
    assert decoded == event
    assert isinstance(decoded.payload, BootstrapObjectPayload) and decoded.payload.partition_statistics == []
