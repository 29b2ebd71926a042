"""The pure drift comparison: the source reconstructed at a cut-off, and each kind of drift found."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import FileRef
from streamer.replay.state import UNPARTITIONED, TableMeta
from streamer.target.apply.plan import GLOBAL_DB, step_db
from streamer.target.dr import drift as d
from streamer.target.dr.drift import (
    ExpectedDatabase,
    ObservedDatabase,
    ObservedFile,
    ObservedTable,
    VerifyReport,
    compare,
    expected_at,
)
from tests.unit.testing.replicas import Run, workload_run

SEED, EVENTS = 23, 160


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return workload_run(tmp_path_factory.mktemp("drift-workload"), SEED, EVENTS)


def databases(run: Run) -> list[str]:
    return sorted({step_db(e).lower() for e in run.events if step_db(e) != GLOBAL_DB})


def replica(expected: ExpectedDatabase) -> ObservedDatabase:
    """What a faithful target shows: the expected state, files with the digests the source recorded."""
    assert expected.parameters is not None
    tables = {}
    for name, state in expected.tables.items():
        parts = {}
        for part, files in state.partitions:
            parts[part] = {
                path: ObservedFile(f"file:///t/{name}/{part}/{path}", _size(expected, name, part, path),
                                   checksum or None)
                for path, checksum in files
            }
        locations = {part: f"file:///t/{name}/{part}" for part in parts}
        tables[name] = ObservedTable(state.meta, parts, locations, state.write_ids)
    return ObservedDatabase(expected.name, expected.event_id, expected.parameters, tables)


def _size(expected: ExpectedDatabase, table: str, part: str, path: str) -> int:
    ref = expected.refs.get((table, part, path))
    return ref.size if ref is not None and ref.size is not None else 0


def test_expected_state_at_every_cutoff_is_the_checkers_history(run: Run) -> None:
    """The replay per database equals the consistency checker's history at the same event id."""
    h = run.history
    for cut in [*h.event_ids[:: max(1, len(h.event_ids) // 25)], h.last_event_id]:
        dbs = databases(run)
        got = expected_at(run.events, {db: cut for db in dbs})
        states = h.states_at(cut)
        for db in dbs:
            want = {k.split(".", 1)[1]: s for k, s in states.items() if k.startswith(db + ".")}
            assert dict(got[db].tables) == want, (db, cut)
            later = sum(1 for e in run.events if e.event_id > cut and step_db(e).lower() == db)
            assert got[db].later_events == later


def test_per_database_cutoffs_are_independent(run: Run) -> None:
    dbs = databases(run)
    h = run.history
    middle = h.event_ids[len(h.event_ids) // 2]
    cutoffs = {db: (middle if i % 2 else h.last_event_id) for i, db in enumerate(dbs)}
    got = expected_at(run.events, cutoffs)
    for db, cut in cutoffs.items():
        assert got[db] == expected_at(run.events, {db: cut})[db]


def test_faithful_replica_has_no_drift_and_counts_what_it_compared(run: Run) -> None:
    last = run.history.last_event_id
    total_files = 0
    for expected in expected_at(run.events, {db: last for db in databases(run)}).values():
        if expected.parameters is None:
            continue
        report = compare(expected, replica(expected))
        assert report.drifts == (), report.drifts
        assert report.counts.tables == len(expected.tables)
        total_files += report.counts.files
    assert total_files > 10


def test_a_replica_of_an_earlier_state_drifts_from_the_later_one(run: Run) -> None:
    """The cut-off matters: the state after E is not the state after the head (the source moved on)."""
    h = run.history
    dbs = databases(run)
    early = h.event_ids[len(h.event_ids) // 3]
    at_early = expected_at(run.events, {db: early for db in dbs})
    at_last = expected_at(run.events, {db: h.last_event_id for db in dbs})
    drifted = 0
    for db in dbs:
        if at_early[db].parameters is None or at_last[db].parameters is None:
            continue
        drifted += len(compare(at_last[db], replica(at_early[db])).drifts)
        assert compare(at_early[db], replica(at_early[db])).drifts == ()
    assert drifted > 0


def test_missing_and_extra_databases(run: Run) -> None:
    expected = next(iter(expected_at(run.events, {"nosuch": run.history.last_event_id}).values()))
    assert expected.parameters is None
    assert compare(expected, None).drifts == ()
    assert [x.kind for x in compare(expected, ObservedDatabase("nosuch", 1, ())).drifts] == [d.DATABASE]
    db = databases(run)[0]
    real = expected_at(run.events, {db: run.history.last_event_id})[db]
    assert [x.kind for x in compare(real, None).drifts] == [d.DATABASE]


# --- one mutation, one drift of its kind ---------------------------------------------------------


def _mutations(observed: ObservedDatabase) -> dict[str, list[ObservedDatabase]]:
    """Every single change of a faithful replica, by the drift kind it must produce."""
    out: dict[str, list[ObservedDatabase]] = {k: [] for k in d.KINDS}

    def with_table(name: str, table: ObservedTable | None) -> ObservedDatabase:
        tables = dict(observed.tables)
        if table is None:
            del tables[name]
        else:
            tables[name] = table
        return dataclasses.replace(observed, tables=tables)

    out[d.DATABASE].append(dataclasses.replace(observed, parameters=(*observed.parameters, ("zz", "1"))))
    out[d.TABLE].append(with_table("zz_extra", ObservedTable(TableMeta("MANAGED_TABLE", (), (), ()))))
    for name, t in sorted(observed.tables.items()):
        out[d.TABLE].append(with_table(name, None))
        cols = t.meta.columns
        if cols:
            changed = ((cols[0][0], cols[0][1] + "x"), *cols[1:])
            out[d.SCHEMA].append(with_table(name, dataclasses.replace(t, meta=dataclasses.replace(
                t.meta, columns=changed))))
        params = tuple(sorted((*t.meta.parameters, ("verify.test", "x"))))
        out[d.PARAMETERS].append(with_table(name, dataclasses.replace(t, meta=dataclasses.replace(
            t.meta, parameters=params))))
        if t.meta.transactional:
            more = dataclasses.replace(t, write_ids=(*t.write_ids, 99_999))
            out[d.WRITE_IDS].append(with_table(name, more))
        for part, files in sorted(t.partitions.items()):
            if part != UNPARTITIONED:
                parts = {p: f for p, f in t.partitions.items() if p != part}
                out[d.PARTITION].append(with_table(name, dataclasses.replace(t, partitions=parts)))
            extra = {**files, "zz-extra.csv": ObservedFile("file:///x", 1)}
            with_extra = dataclasses.replace(t, partitions={**t.partitions, part: extra})
            out[d.FILE].append(with_table(name, with_extra))
            for path, f in sorted(files.items()):
                gone = {p: x for p, x in files.items() if p != path}
                out[d.FILE].append(with_table(name, dataclasses.replace(
                    t, partitions={**t.partitions, part: gone})))
                if f.digest:
                    bad = {**files, path: dataclasses.replace(f, digest="0" * 64)}
                    out[d.CHECKSUM].append(with_table(name, dataclasses.replace(
                        t, partitions={**t.partitions, part: bad})))
    return out


@pytest.fixture(scope="module")
def mutated(run: Run) -> list[tuple[str, ExpectedDatabase, ObservedDatabase]]:
    last = run.history.last_event_id
    cases = []
    for expected in expected_at(run.events, {db: last for db in databases(run)}).values():
        if expected.parameters is None:
            continue
        for kind, variants in _mutations(replica(expected)).items():
            cases.extend((kind, expected, v) for v in variants)
    assert {k for k, _, _ in cases} >= {d.DATABASE, d.TABLE, d.SCHEMA, d.PARAMETERS, d.PARTITION, d.FILE,
                                         d.CHECKSUM}
    return cases


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_each_mutation_is_reported_once_by_its_kind(
    mutated: list[tuple[str, ExpectedDatabase, ObservedDatabase]], data: st.DataObject
) -> None:
    kind, expected, observed = data.draw(st.sampled_from(mutated))
    drifts = compare(expected, observed).drifts
    assert [x.kind for x in drifts] == [kind], drifts
    if kind == d.CHECKSUM or (kind == d.FILE and "missing" in drifts[0].detail):
        assert drifts[0].repair is not None and drifts[0].repair.ref.uri


def test_files_without_a_source_checksum_are_compared_by_size() -> None:
    meta = TableMeta("MANAGED_TABLE", (("id", "bigint"),), (), ())
    from streamer.replay.state import table_state

    state = table_state(meta, {UNPARTITIONED: [("a.csv", ""), ("b.csv", "")]})
    refs = {("t", UNPARTITIONED, "a.csv"): FileRef("file:///s/a.csv", size=10),
            ("t", UNPARTITIONED, "b.csv"): FileRef("file:///s/b.csv")}
    expected = ExpectedDatabase("db", 5, (), {"t": state}, refs)
    files = {"a.csv": ObservedFile("file:///t/a.csv", 10), "b.csv": ObservedFile("file:///t/b.csv", 3)}
    observed = ObservedDatabase("db", 5, (), {"t": ObservedTable(meta, {UNPARTITIONED: files},
                                                                  {UNPARTITIONED: "file:///t"})})
    report = compare(expected, observed)
    assert report.drifts == () and report.counts.unverified == 2
    short = {**files, "a.csv": ObservedFile("file:///t/a.csv", 9)}
    observed = dataclasses.replace(observed, tables={"t": ObservedTable(meta, {UNPARTITIONED: short},
                                                                        {UNPARTITIONED: "file:///t"})})
    (only,) = compare(expected, observed).drifts
    assert only.kind == d.SIZE and only.repair is not None and only.repair.directory == "file:///t"


def test_report_renders_a_table_and_json(run: Run) -> None:
    last = run.history.last_event_id
    db = next(x for x in databases(run) if expected_at(run.events, {x: last})[x].parameters is not None)
    expected = expected_at(run.events, {db: last})[db]
    observed = replica(expected)
    broken = dataclasses.replace(observed, parameters=(("zz", "1"),))
    report = VerifyReport([compare(expected, broken)])
    assert not report.ok and report.by_db_kind() == {(db, d.DATABASE): 1}
    body = report.to_json()
    assert body["ok"] is False and body["databases"][0]["drift"] == {"database": 1}
    assert body["drifts"][0]["kind"] == "database"
    text = report.render()
    assert db in text and "1 drifted object(s)" in text
    assert VerifyReport([compare(expected, observed)]).render().endswith("no drift")


def test_events_out_of_order_are_refused(run: Run, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="id order"):
        expected_at(list(reversed(run.events[:3])), {"x": 1})


def test_files_without_a_checksum_compare_with_the_recomputed_source_copy() -> None:
    from streamer.replay.state import table_state

    meta = TableMeta("MANAGED_TABLE", (("id", "bigint"),), (), ())
    state = table_state(meta, {UNPARTITIONED: [("a.csv", "")]})
    refs = {("t", UNPARTITIONED, "a.csv"): FileRef("file:///s/a.csv", size=3)}
    expected = ExpectedDatabase("db", 5, (), {"t": state}, refs)
    assert [f[:3] for f in expected.unchecked_files()] == [("t", UNPARTITIONED, "a.csv")]
    assert dataclasses.replace(expected, moving=frozenset({"t"})).unchecked_files() == []
    expected = expected.with_recomputed({("t", UNPARTITIONED, "a.csv"): "ab" * 32})
    assert d.checksum_algorithm(expected, "t", UNPARTITIONED, "a.csv") == "sha256"

    def seen(digest: str) -> ObservedDatabase:
        files = {"a.csv": ObservedFile("file:///t/a.csv", 3, digest)}
        table = ObservedTable(meta, {UNPARTITIONED: files}, {UNPARTITIONED: "file:///t"})
        return ObservedDatabase("db", 5, (), {"t": table})

    good = compare(expected, seen("AB" * 32))
    assert good.drifts == () and good.counts.unverified == 0
    (bad,) = compare(expected, seen("cd" * 32)).drifts
    assert bad.kind == d.CHECKSUM and "recomputed" in bad.detail


def test_tables_changed_after_the_cutoff_are_moving(run: Run) -> None:
    h = run.history
    cut = h.event_ids[len(h.event_ids) // 2]
    dbs = databases(run)
    got = expected_at(run.events, {db: cut for db in dbs})
    touched = {(e.db or "").lower(): set() for e in run.events}
    for e in run.events:
        if e.event_id > cut and e.db and e.table:
            touched[e.db.lower()].add(e.table.lower())
    for db in dbs:
        assert touched.get(db, set()) <= got[db].moving, db
    assert any(got[db].moving for db in dbs)


def test_a_bootstrap_then_events_gives_the_same_state_as_the_whole_history(tmp_path: Path) -> None:
    """A topic that starts with a bootstrap (no history before it) verifies like one with history."""
    from streamer.hive.decode import decode_row
    from streamer.source.bootstrap import records, snapshot
    from streamer.source.enrich import EnrichSettings
    from streamer.source.policy import PolicySet
    from streamer.source.reader import SqlNotificationReader
    from streamer.source.warehouse_catalog import WarehouseCatalog
    from streamer.warehouse import Warehouse
    from streamer.warehouse.workload import Workload
    from tests.unit.testing.replicas import with_txn_writes

    wh = Warehouse.open(str(tmp_path / "m.sqlite"), root=tmp_path / "wh", cmroot=tmp_path / "cm",
                        source_id="s")
    reader = SqlNotificationReader(str(tmp_path / "m.sqlite"))
    try:
        load = Workload(wh, seed=7, txn_share=0.15)
        load.run(60)
        enrich = EnrichSettings(cmroot=str(tmp_path / "cm"))
        state = snapshot(WarehouseCatalog(wh), reader, PolicySet.parse(["*"]), "s", enrich=enrich)
        dumped = records(state, "s")
        load.run(40)
        events = [with_txn_writes(decode_row(row, "s"), wh) for row in wh.notifications()]
    finally:
        reader.close()
        wh.close()
    after = [e for e in events if e.event_id > state.event_id]
    dbs = sorted({e.db.lower() for e in events if e.db})
    last = events[-1].event_id
    for cut in (state.event_id, last):
        whole = expected_at(events, {db: cut for db in dbs})
        booted = expected_at([*dumped, *after], {db: cut for db in dbs})
        for db in dbs:
            assert dict(booted[db].tables) == dict(whole[db].tables), (db, cut)
            assert booted[db].parameters == whole[db].parameters, (db, cut)
        assert sum(len(e.refs) for e in booted.values()) > 5
        assert any(s.meta.transactional for e in booted.values() for s in e.tables.values())
