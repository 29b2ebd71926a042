"""An INSERT whose files are gone applies with the later event that replaces or drops them, as one
step of its table (issue 25): a target behind an unpaced Hive 2.3 writer (which recycles nothing an
INSERT OVERWRITE replaces) neither halts nor diverges; without such an event it still halts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import AddPartitionPayload, AlterPartitionPayload, Event, EventType, FileRef
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.apply.sources import SourceRules
from streamer.target.apply.voiding import voiding_run
from tests.unit.target import builders as b

from .test_apply import Env, make_env
from .test_plan_coalesce import (
    DB,
    FIRST,
    MAX_EVENTS,
    SRC,
    _table,
    alter,
    alter_partition,
    final_state,
    one_by_one,
    rename,
    setup_events,
    source_file,
    source_files,  # noqa: F401 - the module's source files (autouse fixture)
    stats,
)


def gone(event_id: int) -> FileRef:
    """A file the source deleted before the target copied it (its content was ``row <id>``)."""
    content = f"row {event_id}\n".encode()
    return FileRef(f"file://{SRC}/gone-{event_id}.txt", checksum=hashlib.sha256(content).hexdigest(),
                   checksum_algorithm="sha256", size=len(content))


def insert(event_id: int, name: str, part: str, *, replace: bool = False, missing: bool = False) -> Event:
    ref = gone(event_id) if missing else source_file(event_id)
    return b.insert(event_id, _table(name), [ref], values=[part], replace=replace)


def _env(root: Path) -> Env:
    return make_env(root, sources=SourceRules((SRC.as_uri(),)))


# --- the run, pure -----------------------------------------------------------------------------

def test_the_run_reaches_the_overwrite_and_grows_to_void_every_insert_inside() -> None:
    first = insert(FIRST, "t", "1", missing=True)
    later = [
        insert(FIRST + 1, "t", "2"),  # another partition, overwritten after the first overwrite
        stats(FIRST + 2, "t", ("id",), 1, "1"),
        insert(FIRST + 3, "u", "1"),  # another table: not in the run
        insert(FIRST + 4, "t", "1", replace=True),
        insert(FIRST + 5, "t", "2", replace=True),
        insert(FIRST + 6, "t", "1"),  # after the run
    ]
    run = voiding_run([first], later)
    assert run is not None
    assert (run.start, run.end) == (FIRST, FIRST + 5)
    assert run.voided == {FIRST, FIRST + 1}
    assert run.deferred == (FIRST + 2, FIRST + 4)
    assert not run.holds(FIRST + 3) and not run.holds(FIRST + 6)


def test_an_alter_that_names_the_location_one_way_or_on_one_side_only_does_not_stop_the_run() -> None:
    snap = _table("t")
    first = insert(FIRST, "t", "1", missing=True)
    written = b.partition(snap, "1")
    where = written.sd.location or ""
    for before, after in [("", where), (where.replace("file:///", "file:/"), where + "/")]:
        alter = b.event(FIRST + 1, EventType.ALTER_PARTITION, AlterPartitionPayload(
            snap, dataclasses.replace(written, sd=dataclasses.replace(written.sd, location=before)),
            dataclasses.replace(written, sd=dataclasses.replace(written.sd, location=after))), DB, "t")
        run = voiding_run([first], [alter, insert(FIRST + 2, "t", "1", replace=True)])
        assert run is not None and run.end == FIRST + 2, (before, after)


def test_an_overwrite_ending_the_run_that_a_later_drop_voids_is_voided_too() -> None:
    """INSERT, INSERT OVERWRITE, DROP TABLE written faster than the target reads: the overwrite's
    files are gone as well, and the drop ends the run."""
    first = insert(FIRST, "t", "1", missing=True)
    later = [insert(FIRST + 1, "t", "1", replace=True), stats(FIRST + 2, "t", ("id",), 1, "1"),
             b.drop_table(FIRST + 3, _table("t"))]
    run = voiding_run([first], later)
    assert run is not None and run.end == FIRST + 3 and run.voided == {FIRST, FIRST + 1}


def test_drops_and_truncates_void_too() -> None:
    first = insert(FIRST, "t", "1", missing=True)
    for voider in [
        b.drop_partition(FIRST + 1, _table("t"), [["1"]]),
        b.drop_table(FIRST + 1, _table("t")),
        alter(FIRST + 1, "t", "x", truncate=True),
    ]:
        run = voiding_run([first], [voider])
        assert run is not None and run.end == FIRST + 1 and run.voided == {FIRST}, voider


def test_a_statistics_alter_voids_only_on_a_table_replicated_by_state() -> None:
    """Spark writes a datasource table logging no INSERT, only an ALTER of its file statistics, on
    which the target syncs the table's directories from the source: that replaces earlier files."""
    for params, voids in [({"spark.sql.sources.provider": "parquet"}, True), ({}, False)]:
        snap = dataclasses.replace(b.table(DB, "s"), parameters=params)
        first = b.insert(FIRST, snap, [gone(FIRST)])
        written = dataclasses.replace(snap, parameters={**snap.parameters, "numFiles": "2"})
        run = voiding_run([first], [b.alter_table(FIRST + 1, snap, written)])
        assert (run is not None and run.end == FIRST + 1) is voids, params
        same = dataclasses.replace(snap, parameters={**snap.parameters, "comment": "x"})
        assert voiding_run([first], [b.alter_table(FIRST + 1, snap, same)]) is None  # no statistics


def test_a_run_ending_inside_a_coalesced_step_ends_with_that_step(tmp_path: Path) -> None:
    """Spark logs two statistics ALTERs after its write; the planner makes them one step (the last
    stands for both), so the run that the first one ends must end at the second."""
    missing = f"{SRC.as_uri()}/nowhere/a.db/s"  # below the declared prefix, as a sync needs; no files
    snap = dataclasses.replace(b.table(DB, "s", location=missing),
                               parameters={"spark.sql.sources.provider": "parquet"})
    counted = [dataclasses.replace(snap, parameters={**snap.parameters, "numFiles": str(n)})
               for n in (1, 2, 3)]
    events = [
        b.create_table(FIRST, snap),
        b.insert(FIRST + 1, snap, [gone(FIRST + 1)]),
        b.alter_table(FIRST + 2, counted[0], counted[1]),
        b.alter_table(FIRST + 3, counted[1], counted[2]),
    ]
    planned = plan(events, {DB: FIRST - 1})
    assert [s.event_ids for s in planned.steps][1:] == [(FIRST + 1,), (FIRST + 2, FIRST + 3)]
    run = voiding_run(events[1:2], events[2:], {FIRST + 3})
    assert run is not None and run.end == FIRST + 3 and run.deferred == (FIRST + 2,)
    env = _env(tmp_path)
    env.run(setup_events())
    report = run_plan(env.applier, planned, env.state)
    assert not report.halted, report.halted
    assert env.applier.progress[DB] == FIRST + 3


def test_a_table_replicated_by_state_whose_files_are_gone_is_synced_from_the_source(tmp_path: Path) -> None:
    """Spark's datasource writer replaced a new partition's files logging nothing: nothing will void
    them, and the table's guarantee is the source's state as it is now, so the target syncs it."""
    where = SRC / "state" / "a.db" / "s"
    (where / "dt=2").mkdir(parents=True, exist_ok=True)
    (where / "dt=2" / "now").write_bytes(b"rows now")
    try:
        snap = dataclasses.replace(b.table(DB, "s", ("dt",), location=where.as_uri()),
                                   parameters={"spark.sql.sources.provider": "parquet"})
        added = b.add_partition(FIRST + 1, snap, [b.partition(snap, "2")])
        assert isinstance(added.payload, AddPartitionPayload)
        lost = dataclasses.replace(gone(FIRST + 1), partition="dt=2")
        added = dataclasses.replace(added, payload=dataclasses.replace(added.payload, files=[lost]))
        env = _env(tmp_path)
        env.run(setup_events())
        assert env.run([b.create_table(FIRST, snap), added]) == [FIRST, FIRST + 1]
        assert not env.state.halts()
        files = {k: v for k, v in env.files().items() if k.startswith("a.db/s/")}
        assert files == {"a.db/s/dt=2/now": b"rows now"}, files
    finally:
        shutil.rmtree(SRC / "state")


def test_review_findings_a_malformed_later_event_a_hidden_refusal_an_external_drop(tmp_path: Path) -> None:
    # a later event whose partition values do not fit the keys: no run, a halt (not a crashed batch)
    env = _env(tmp_path / "malformed")
    env.run(setup_events())
    snap = _table("t")
    odd = b.add_partition(FIRST + 1, snap, [dataclasses.replace(b.partition(snap, "3"), values=["3", "x"])])
    assert isinstance(odd.payload, AddPartitionPayload)
    odd = dataclasses.replace(odd, payload=dataclasses.replace(
        odd.payload, files=[dataclasses.replace(source_file(FIRST + 1), partition="p=3")]))
    batch = [insert(FIRST, "t", "1", missing=True), odd, insert(FIRST + 2, "t", "1", replace=True)]
    report = run_plan(env.applier, plan(batch, {DB: FIRST - 1}), env.state)
    assert DB in report.halted and not env.applier.pins
    # a file refused for its location is not hidden behind another file's missing checksum
    env = _env(tmp_path / "hidden")
    env.run(setup_events())
    unverifiable = dataclasses.replace(gone(FIRST), checksum=None, checksum_algorithm=None)
    outside = dataclasses.replace(source_file(FIRST), uri="file:///etc/hostname")
    crafted = b.insert(FIRST, _table("t"), [unverifiable, outside], values=["1"])
    env.run([crafted, insert(FIRST + 1, "t", "1", replace=True)])
    assert env.state.halts()[DB].event_id == FIRST
    # the target keeps an external table's files when it is dropped: no voiding
    external = b.table(DB, "x", table_type="EXTERNAL_TABLE")
    first = b.insert(FIRST, external, [gone(FIRST)])
    assert voiding_run([first], [b.drop_table(FIRST + 1, external)]) is None


def test_no_run_without_a_voiding_event_before_the_table_moves() -> None:
    first = insert(FIRST, "t", "1", missing=True)
    cases = [
        [],
        [insert(FIRST + 1, "t", "2", replace=True)],  # another partition
        [insert(FIRST + 1, "u", "1", replace=True)],  # another table
        [b.drop_partition(FIRST + 1, _table("t"), [["2"]])],
        [rename(FIRST + 1, "t", "v"), insert(FIRST + 2, "v", "1", replace=True)],
        [rename(FIRST + 1, "u", "t")],
        [alter_partition(FIRST + 1, "t", "1", "x", new_values="9"),
         insert(FIRST + 2, "t", "1", replace=True)],
        [b.drop_db(FIRST + 1, DB), insert(FIRST + 2, "t", "1", replace=True)],
    ]
    for later in cases:
        assert voiding_run([first], later) is None, later
    transactional = b.insert(FIRST, _table("t", transactional="true"), [gone(FIRST)], values=["1"])
    assert voiding_run([transactional], [insert(FIRST + 1, "t", "1", replace=True)]) is None


# --- the run, applied --------------------------------------------------------------------------

def test_a_gone_insert_applies_with_its_overwrite_and_other_tables_go_on(tmp_path: Path) -> None:
    env = _env(tmp_path)
    env.run(setup_events())
    events = [
        insert(FIRST, "t", "1", missing=True),
        stats(FIRST + 1, "t", ("id",), 7, "1"),
        insert(FIRST + 2, "u", "1"),
        insert(FIRST + 3, "t", "1", replace=True),
    ]
    assert sorted(env.run(events)) == [e.event_id for e in events]
    assert not env.state.halts()
    files = env.files()
    assert [v for k, v in files.items() if "t/p=1" in k] == [f"row {FIRST + 3}\n".encode()], files
    assert [v for k, v in files.items() if "u/p=1" in k] == [f"row {FIRST + 2}\n".encode()], files
    assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(FIRST + 3)


def test_a_partition_added_with_gone_files_is_added_without_them_then_overwritten(tmp_path: Path) -> None:
    """A dynamic insert creating a partition logs ADD_PARTITION with its files: the run adds the
    partition without the files its later overwrite replaces, and copies the others."""
    env = _env(tmp_path)
    env.run(setup_events())
    snap = _table("t")
    kept = dataclasses.replace(source_file(FIRST + 1), partition="p=4")
    lost = dataclasses.replace(gone(FIRST), partition="p=3")
    added = b.add_partition(FIRST, snap, [b.partition(snap, "3"), b.partition(snap, "4")])
    assert isinstance(added.payload, AddPartitionPayload)
    added = dataclasses.replace(added, payload=dataclasses.replace(added.payload, files=[lost, kept]))
    events = [added, stats(FIRST + 1, "t", ("id",), 7, "3"), insert(FIRST + 2, "t", "3", replace=True)]
    assert sorted(env.run(events)) == [e.event_id for e in events] and not env.state.halts()
    files = env.files()
    assert [v for k, v in files.items() if "t/p=3" in k] == [f"row {FIRST + 2}\n".encode()], files
    assert [v for k, v in files.items() if "t/p=4" in k] == [f"row {FIRST + 1}\n".encode()], files
    assert {("3",), ("4",)} <= set(env.catalog.partitions[(DB, "t")])


def test_a_run_reaching_a_merged_drop_of_partitions_ends_with_the_whole_step(tmp_path: Path) -> None:
    """Hive 2.x logs a drop of two partitions as two DROP_PARTITIONs, one step in the plan: the gone
    INSERT's run, voided by the first, ends with the step (a run ends where a step does), and the
    table goes from before the INSERT to after both drops."""
    env = _env(tmp_path)
    env.run(setup_events())
    snap = _table("t")
    events = [
        insert(FIRST, "t", "1", missing=True),
        insert(FIRST + 1, "u", "1"),
        b.drop_partition(FIRST + 2, snap, [["1"]]),
        b.drop_partition(FIRST + 3, snap, [["2"]]),
    ]
    assert [len(s.events) for s in plan(events, env.applier.load_progress()).steps] == [1, 1, 2]
    the_plan = plan(events, env.applier.load_progress())
    later = [e for s in the_plan.steps[1:] for e in s.events]
    run = voiding_run([events[0]], later, {s.last_event_id for s in the_plan.steps[1:]})
    assert run is not None and run.end == FIRST + 3
    assert sorted(env.run(events)) == [e.event_id for e in events]
    assert not env.state.halts()
    assert (DB, "t") not in env.catalog.partitions or not env.catalog.partitions[(DB, "t")]
    assert not [k for k in env.files() if "/t/" in k]
    assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(FIRST + 3)


def test_a_file_gone_before_the_agent_could_checksum_it_is_voided_too(tmp_path: Path) -> None:
    """The agent found it gone when it published the event, so the event carries no checksum: refused
    as unverifiable, unless a later event voids it (then it is never read)."""
    env = _env(tmp_path)
    env.run(setup_events())
    unverifiable = dataclasses.replace(gone(FIRST), checksum=None, checksum_algorithm=None)
    first = b.insert(FIRST, _table("t"), [unverifiable], values=["1"])
    assert env.run([first, insert(FIRST + 1, "t", "1", replace=True)]) == [FIRST, FIRST + 1]
    assert not env.state.halts()
    env = _env(tmp_path / "alone")
    env.run(setup_events())
    env.run([first, insert(FIRST + 1, "u", "1", replace=True)])
    assert "no checksum" in env.state.halts()[DB].cause
    outside = dataclasses.replace(gone(FIRST), uri="file:///etc/hostname")  # a refused location is
    env = _env(tmp_path / "outside")  # never voided: it halts, so that the operator sees it
    env.run(setup_events())
    crafted = b.insert(FIRST, _table("t"), [outside], values=["1"])
    env.run([crafted, insert(FIRST + 1, "t", "1", replace=True)])
    assert env.state.halts()[DB].event_id == FIRST


def test_a_crafted_insert_inside_a_run_is_checked_though_never_applied(tmp_path: Path) -> None:
    """Its envelope names table t, its payload table u: voided, it would pass unseen."""
    env = _env(tmp_path)
    env.run(setup_events())
    crafted = dataclasses.replace(insert(FIRST + 1, "u", "1"), table="t")
    env.run([insert(FIRST, "t", "1", missing=True), crafted, insert(FIRST + 2, "t", "1", replace=True)])
    halt = env.state.halts()[DB]
    assert halt.event_id == FIRST and f"event {FIRST + 1} failed" in halt.cause, halt


def test_without_a_voiding_event_the_database_halts_at_the_insert(tmp_path: Path) -> None:
    env = _env(tmp_path)
    env.run(setup_events())
    env.run([insert(FIRST, "t", "1", missing=True), insert(FIRST + 1, "u", "1")])
    halt = env.state.halts()[DB]
    assert halt.event_id == FIRST and "no copy matches" in halt.cause


def test_a_run_that_fails_at_its_end_halts_at_its_start_with_progress_before_it(tmp_path: Path) -> None:
    """Other tables' events applied meanwhile do not move ``repl.last.id`` past the run's start: a
    retry re-reads the run whole (its deferred events were never applied)."""
    env = _env(tmp_path)
    env.run(setup_events())
    events = [
        insert(FIRST, "t", "1", missing=True),
        alter(FIRST + 1, "u", "7"),  # applied while the run is pending
        stats(FIRST + 2, "t", ("id",), 7, "1"),  # deferred, never applied
        b.insert(FIRST + 3, _table("t"), [gone(FIRST + 3)], values=["1"], replace=True),  # fails too
    ]
    env.run(events)
    halt = env.state.halts()[DB]
    assert halt.event_id == FIRST
    assert f"event {FIRST + 3} failed while a voiding run was pending" in halt.cause
    assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(FIRST - 1)
    assert env.catalog.tables[(DB, "u")].parameters.get("v") == "7"


# --- property: a batch ends where applying every event would, or halts at a gone file's INSERT ---

RUNS_SEEN: list[int] = []  # the property must meet runs, or it proves nothing


@st.composite
def writes(draw: st.DrawFn) -> list[Event]:
    out: list[Event] = []
    for _ in range(draw(st.integers(1, MAX_EVENTS - 1))):
        event_id = FIRST + len(out)
        if event_id >= FIRST + MAX_EVENTS - 1:
            break
        name = draw(st.sampled_from(("t", "u")))
        part = draw(st.sampled_from("12"))
        kinds = ["insert", "gone", "replace", "replace", "part", "stats", "drop", "drops"]
        kind = draw(st.sampled_from(kinds))
        if kind in ("insert", "gone", "replace"):
            out.append(insert(event_id, name, part, replace=kind == "replace", missing=kind == "gone"))
        elif kind == "part":
            out.append(alter_partition(event_id, name, part, str(event_id)))
        elif kind == "drop":  # and added again, empty: the source's history stays one a writer can make
            snap = _table(name)
            out.append(b.drop_partition(event_id, snap, [[part]]))
            out.append(b.add_partition(event_id + 1, snap, [b.partition(snap, part)]))
        elif kind == "drops":  # both partitions, one event each (as Hive 2.x logs them): one step
            snap = _table(name)
            out.append(b.drop_partition(event_id, snap, [[part]]))
            out.append(b.drop_partition(event_id + 1, snap, [["2" if part == "1" else "1"]]))
            out.append(b.add_partition(event_id + 2, snap, [b.partition(snap, "1"), b.partition(snap, "2")]))
        else:
            out.append(stats(event_id, name, ("id",), event_id, part))
    return out


def _with_files_present(events: list[Event]) -> None:
    """The reference world, where no file was deleted before the target copied it."""
    for e in events:
        for ref in getattr(e.payload, "files", []):
            path = Path(ref.uri.removeprefix("file://"))
            if not path.exists():
                path.write_bytes(f"row {e.event_id}\n".encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes())
def test_a_batch_ends_in_the_state_of_applying_every_event_or_halts_at_an_unvoided_gone_insert(
    events: list[Event],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "target"
        _with_files_present(events)  # the reference: every event applied, no file deleted
        try:
            expected, expected_files, _ = final_state(root, [one_by_one(setup_events()), one_by_one(events)])
        finally:
            for stale in SRC.glob("gone-*"):
                stale.unlink()
        shutil.rmtree(root)
        env = _env(root)
        env.run(setup_events())
        report = run_plan(env.applier, plan(events, env.applier.load_progress()), env.state)
        got, got_files = env.catalog.dump(), env.files()
    if report.halted:
        halt = report.halted[DB]
        failed = next(e for e in events if e.event_id == halt.event_id)
        assert "no copy matches" in halt.cause, halt
        later = [e for e in events if e.event_id > failed.event_id]
        assert voiding_run([failed], later) is None or "voiding run was pending" in halt.cause, halt
        return
    if any("gone" in ref.uri for e in events for ref in getattr(e.payload, "files", [])):
        RUNS_SEEN.append(len(events))
    assert got == expected
    assert got_files == expected_files


def test_the_property_met_runs() -> None:
    assert RUNS_SEEN, "no generated batch applied a gone INSERT through a run"
