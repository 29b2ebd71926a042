"""A backlog regrouped per table (``--coalesce-backlog``, streamer.target.apply.reorder).

The properties: regrouping keeps every event, keeps the order of events that touch the same object
(and of everything across a barrier), never takes more catalog calls, and applying the regrouped
plan ends in exactly the state applying every event one by one ends in (in-memory catalog, real
temp dirs), with the fence lifted and ``repl.last.id`` at the batch's last event. While it runs, the
database is fenced; a halt or a crash leaves the fence and the marker before the batch.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamer import metrics
from streamer.events.model import DatabaseSnapshot, Event, EventType
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM
from streamer.target.apply.applier import regrouped
from streamer.target.apply.journal import ProgressJournal
from streamer.target.apply.markers import DEFER_MIN_EVENTS
from streamer.target.apply.plan import Plan, StepKind, plan
from streamer.target.apply.reorder import PARTITIONS, TABLE, _touches, movable, reorder
from streamer.target.apply.runner import run_plan
from streamer.target.apply.sources import SourceRules
from streamer.target.state.state_file import StateError
from tests.unit.target import builders as b

from .test_apply import Env, make_env
from .test_plan_coalesce import (
    DB,
    FIRST,
    MAX_EVENTS,
    SRC,
    TABLES,
    _table,
    alter,
    alter_partition,
    one_by_one,
    setup_events,
    source_file,
    source_files,  # noqa: F401 (the module's source files, an autouse fixture)
    stats,
)


@st.composite
def backlog(draw: st.DrawFn) -> list[Event]:
    """A backlog of two tables' events, interleaved, with the occasional barrier."""
    out: list[Event] = []
    added: dict[str, list[str]] = {name: [] for name in TABLES}
    for event_id in range(FIRST, FIRST + draw(st.integers(DEFER_MIN_EVENTS, MAX_EVENTS))):
        name = draw(st.sampled_from(TABLES))
        snap = _table(name)
        value = str(draw(st.integers(0, 3)))
        kind = draw(st.sampled_from(
            ["add", "add", "insert", "insert", "alter", "alter", "part", "stats", "pstats", "truncate",
             "drop", "barrier"]
        ))
        if kind == "add":
            out.append(b.add_partition(event_id, snap, [b.partition(snap, str(event_id))]))
            added[name].append(str(event_id))
        elif kind == "insert":
            part = draw(st.sampled_from(["1", "2", *added[name]]))
            out.append(b.insert(event_id, snap, [source_file(event_id)], values=[part]))
        elif kind in ("alter", "truncate"):
            out.append(alter(event_id, name, value, truncate=kind == "truncate"))
        elif kind == "part":
            out.append(alter_partition(event_id, name, draw(st.sampled_from("12")), value))
        elif kind in ("stats", "pstats"):
            part = draw(st.sampled_from("12")) if kind == "pstats" else None
            out.append(stats(event_id, name, ("id",), int(value), part))
        elif kind == "drop" and added[name]:
            gone = added[name].pop(draw(st.integers(0, len(added[name]) - 1)))
            out.append(b.drop_partition(event_id, snap, [[gone]]))
        else:  # an external table: may share a location, so it stays in place
            ext = b.table(DB, f"x{event_id}", table_type="EXTERNAL_TABLE")
            out.append(b.create_table(event_id, ext))
    return out


def _conflict(a: Event, b_: Event) -> bool:
    if not (movable(a) and movable(b_)):
        return True  # a barrier orders everything
    if a.table != b_.table:
        return False
    (la, pa), (lb, pb) = _touches(a), _touches(b_)
    if TABLE in (la, lb):
        return True
    if la == PARTITIONS and lb == PARTITIONS:
        return bool(pa & pb)
    return la == lb  # two property-only ALTERs


def _drops_of_partitions_added_apart() -> list[Event]:
    """Found by Hypothesis: t gets two partitions (one call), an INSERT into the first, then both
    dropped (one call); u's ALTERs make it a backlog. Layered, the second drop could go one layer
    before the first (its partition has no INSERT), which parted the plan's one drop call in two."""
    snap = _table("t")
    first, second = str(FIRST), str(FIRST + 1)
    return [
        b.add_partition(FIRST, snap, [b.partition(snap, first)]),
        b.add_partition(FIRST + 1, snap, [b.partition(snap, second)]),
        b.insert(FIRST + 2, snap, [source_file(FIRST + 2)], values=[first]),
        b.drop_partition(FIRST + 3, snap, [[first]]),
        b.drop_partition(FIRST + 4, snap, [[second]]),
        *(alter(FIRST + i, "u", "1") for i in range(5, 9)),
    ]


@settings(deadline=None)
@given(backlog())
@example(_drops_of_partitions_added_apart())
def test_regrouping_keeps_every_event_and_the_order_of_events_on_one_object(events: list[Event]) -> None:
    before = plan(events, {DB: FIRST - 1})
    after = reorder(before)
    applied = [e for s in after.steps for e in s.events]
    assert sorted(e.event_id for e in applied) == [e.event_id for e in events]
    position = {e.event_id: i for i, e in enumerate(applied)}
    for i, x in enumerate(events):
        for y in events[i + 1 :]:
            if _conflict(x, y) and not (
                _same_step(after, x, y)  # a step applies its events together
            ):
                assert position[x.event_id] < position[y.event_id], (x.event_id, y.event_id)
    assert len(after.steps) <= len(before.steps)
    changed = [e.event_id for e in applied] != [e.event_id for e in events]
    assert any(s.fenced for s in after.steps) == changed


def test_partition_events_the_plan_merged_stay_one_call() -> None:
    events = _drops_of_partitions_added_apart()
    after = reorder(plan(events, {DB: FIRST - 1}))
    kinds = [(s.kind, [e.event_id for e in s.events]) for s in after.steps]
    assert (StepKind.DROP_PARTITIONS, [FIRST + 3, FIRST + 4]) in kinds
    assert (StepKind.ADD_PARTITIONS, [FIRST, FIRST + 1]) in kinds


def _same_step(p: Plan, x: Event, y: Event) -> bool:
    return any(x in s.events and y in s.events for s in p.steps)


def _final(root: Path, plans: list[Plan]) -> tuple[dict[str, object], dict[str, bytes], list[str], Env]:
    env = make_env(root, sources=SourceRules((SRC.as_uri(),)), coalesce_backlog=True)
    calls = 0
    for p in plans:
        calls = len(env.catalog.calls)
        report = run_plan(env.applier, p, env.state)
        assert not report.halted, report.halted
    return env.catalog.dump(), env.files(), env.catalog.calls[calls:], env


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(backlog())
def test_a_regrouped_backlog_ends_in_the_state_of_applying_every_event(events: list[Event]) -> None:
    setup = setup_events()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "target"
        expected, expected_files, every_calls, _ = _final(root, [one_by_one(setup), one_by_one(events)])
        shutil.rmtree(root)
        backlog_plan = reorder(plan(events, {DB: FIRST - 1}))
        got, got_files, calls, env = _final(root, [one_by_one(setup), backlog_plan])
        assert env.applier.progress[DB] == events[-1].event_id
    db = got["databases"][DB]  # type: ignore[index]
    assert isinstance(db, DatabaseSnapshot) and FENCE_PARAM not in db.parameters  # lifted at the end
    assert db.parameters[LAST_ID_PARAM] == str(events[-1].event_id)
    got["databases"][DB] = expected["databases"][DB]  # type: ignore[index]  # markers differ in count only
    assert got == expected
    assert got_files == expected_files
    assert len(calls) <= len(every_calls) + 1  # at most the fence more


def _interleaved() -> list[Event]:
    """Two tables, each getting a new partition and an insert into it, in turn: 4 x 2 x 2 events."""
    out: list[Event] = []
    for i in range(4):
        for name in TABLES:
            snap = _table(name)
            event_id = FIRST + len(out)
            out.append(b.add_partition(event_id, snap, [b.partition(snap, f"n{i}")]))
            out.append(b.insert(event_id + 1, snap, [source_file(event_id + 1)], values=[f"n{i}"]))
    return out


def test_each_tables_new_partitions_are_one_call_and_the_database_is_fenced_meanwhile(tmp_path: Path) -> None:
    env = make_env(tmp_path, sources=SourceRules((SRC.as_uri(),)), coalesce_backlog=True)
    env.run(setup_events())
    events = _interleaved()
    fences: list[str | None] = []
    real = env.catalog.add_partitions

    def add_partitions(*args: object, **kw: object) -> object:
        fences.append(env.catalog.databases[DB].parameters.get(FENCE_PARAM))
        return real(*args, **kw)  # type: ignore[arg-type]

    env.catalog.add_partitions = add_partitions  # type: ignore[method-assign]
    calls = len(env.catalog.calls)
    counted = metrics.REGISTRY.get_sample_value("streamer_target_events_regrouped_total") or 0.0
    the_plan = regrouped(env.applier, plan(events, env.applier.load_progress()))
    assert [s.kind for s in the_plan.steps[:2]] == [StepKind.ADD_PARTITIONS] * 2
    regrouped_now = metrics.REGISTRY.get_sample_value("streamer_target_events_regrouped_total")
    assert regrouped_now == counted + sum(len(s.events) for s in the_plan.steps if s.fenced) > counted
    report = run_plan(env.applier, the_plan, env.state)
    assert sorted(report.applied) == [e.event_id for e in events]
    assert fences == [str(FIRST), str(FIRST)]  # both calls made behind the fence
    made = env.catalog.calls[calls:]
    assert made.count("add_partitions") == 2  # 8 ADD_PARTITIONs, one call per table
    assert made.count("alter_database") == 2  # the fence, then the marker that lifts it
    assert FENCE_PARAM not in env.catalog.databases[DB].parameters
    assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(events[-1].event_id)


def test_each_tables_dropped_partitions_are_one_call_and_their_directories_go(tmp_path: Path) -> None:
    """New partitions with a file each, then dropped, the two tables in turn: per table one
    ``add_partitions`` and one ``drop_partitions``, ending where event by event ends."""
    events = _interleaved()
    for i in range(4):
        for name in TABLES:
            events.append(b.drop_partition(FIRST + len(events), _table(name), [[f"n{i}"]]))
    root = tmp_path / "target"
    expected, expected_files, _, _ = _final(root, [one_by_one(setup_events()), one_by_one(events)])
    shutil.rmtree(root)
    backlog_plan = reorder(plan(events, {DB: FIRST - 1}))
    drops = [s for s in backlog_plan.steps if s.kind is StepKind.DROP_PARTITIONS]
    assert [len(s.events) for s in drops] == [4, 4] and all(s.fenced for s in drops)
    got, got_files, calls, _ = _final(root, [one_by_one(setup_events()), backlog_plan])
    assert calls.count("drop_partitions") == 2 and calls.count("add_partitions") == 2
    assert not list(root.rglob("p=n*"))  # every dropped partition's directory is gone
    _final(tmp_path / "adds", [one_by_one(setup_events()), one_by_one(events[:16])])
    assert len(list((tmp_path / "adds").rglob("p=n*"))) == 8  # where the inserts had put files
    got["databases"][DB] = expected["databases"][DB]  # type: ignore[index]  # markers differ in count only
    assert (got, got_files) == (expected, expected_files)


def test_a_small_batch_and_a_target_without_the_setting_keep_event_order(tmp_path: Path) -> None:
    env = make_env(tmp_path, sources=SourceRules((SRC.as_uri(),)), coalesce_backlog=True)
    events = _interleaved()
    small = plan(events[: DEFER_MIN_EVENTS - 1], {DB: FIRST - 1})
    assert regrouped(env.applier, small) is small
    plain = make_env(tmp_path / "plain", markers_per_batch=True)
    full = plan(events, {DB: FIRST - 1})
    assert regrouped(plain.applier, full) is full
    assert not any(s.fenced for s in full.steps)


def test_a_halt_mid_batch_keeps_the_fence_and_re_reads_from_the_first_regrouped_event(tmp_path: Path) -> None:
    env = make_env(tmp_path, sources=SourceRules((SRC.as_uri(),)), coalesce_backlog=True)
    env.run(setup_events())
    events = _interleaved()
    bad = events[-1].event_id  # the last insert's file does not exist at the source
    events[-1] = b.insert(bad, _table(TABLES[1]), [source_file(bad + 1000)], values=["n3"])
    backlog_plan = regrouped(env.applier, plan(events, env.applier.load_progress()))
    halt = run_plan(env.applier, backlog_plan, env.state).halted[DB]
    assert halt.event_id == FIRST  # re-read from the first regrouped event, not the failed one
    assert f"event {bad} failed in a batch regrouped per table" in halt.cause
    params = env.catalog.databases[DB].parameters
    assert params[FENCE_PARAM] == str(FIRST)  # its tables are ahead of the marker: readers keep away
    assert params[LAST_ID_PARAM] == str(FIRST - 1)
    assert env.applier.progress[DB] == FIRST - 1  # the retry re-plans the whole batch
    assert ProgressJournal(env.state.dir).read().get(DB, 0) < FIRST  # and so does a restart
    with pytest.raises(StateError, match="retry it"):  # its halt is where to re-read, not what failed
        env.state.skip(DB, FIRST)
    env.state.set_offset(DB, 3)  # (the job records where the halted event is in the topic)
    env.state.retry(DB)
    replay = plan(events, env.applier.load_progress())
    assert regrouped(env.applier, replay) is replay  # re-read events go in order: a failure halts at itself
    halt = run_plan(env.applier, replay, env.state).halted[DB]
    assert halt.event_id == bad and "regrouped" not in halt.cause
    env.state.skip(DB, bad)  # the operator can now pass exactly that event


def test_a_crash_before_the_markers_leaves_the_fence_and_a_restart_re_applies_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(tmp_path, sources=SourceRules((SRC.as_uri(),)), coalesce_backlog=True)
    env.run(setup_events())
    events = _interleaved()
    real = env.catalog.alter_database

    def alter_database(name: str, db: DatabaseSnapshot, **kw: object) -> None:
        if LAST_ID_PARAM in db.parameters and db.parameters[LAST_ID_PARAM] == str(events[-1].event_id):
            raise OSError("killed")  # the batch's marker write: the job dies here
        real(name, db, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(env.catalog, "alter_database", alter_database)
    progress_before = env.applier.load_progress()
    with pytest.raises(OSError):
        run_plan(env.applier, regrouped(env.applier, plan(events, progress_before)), env.state)
    monkeypatch.setattr(env.catalog, "alter_database", real)
    assert FENCE_PARAM in env.catalog.databases[DB].parameters
    restarted = make_env(tmp_path, sources=SourceRules((SRC.as_uri(),)), coalesce_backlog=True)
    restarted.catalog = env.catalog
    restarted.applier.catalog = env.catalog
    progress = restarted.applier.load_progress()
    assert progress[DB] == FIRST - 1  # nothing of the regrouped batch counts as applied
    assert FENCE_PARAM in env.catalog.databases[DB].parameters  # recovery does not lift it
    again = regrouped(restarted.applier, plan(events, progress))
    report = run_plan(restarted.applier, again, restarted.state)
    assert sorted(report.applied) == [e.event_id for e in events]
    assert FENCE_PARAM not in env.catalog.databases[DB].parameters
    assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(events[-1].event_id)


def test_a_fence_a_crashed_batch_left_is_lifted_by_the_next_batch_even_event_by_event(tmp_path: Path) -> None:
    env = make_env(tmp_path, sources=SourceRules((SRC.as_uri(),)), coalesce_backlog=True)
    env.run(setup_events())
    db = env.catalog.databases[DB]
    env.catalog.databases[DB] = b.replace(db, parameters={**db.parameters, FENCE_PARAM: "7"})
    one = [alter(FIRST, "t", "9")]  # a small batch: a marker per step, the fence until its end
    assert env.run(one) == [FIRST]
    assert FENCE_PARAM not in env.catalog.databases[DB].parameters
    assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(FIRST)


def test_external_tables_renames_and_unknown_table_types_stay_in_place() -> None:
    snap = _table("t")
    ext = b.table(DB, "e", table_type="EXTERNAL_TABLE")
    assert movable(b.add_partition(FIRST, snap, [b.partition(snap, "9")]))
    assert not movable(b.insert(FIRST, ext, [source_file(FIRST)]))
    assert not movable(b.alter_table(FIRST, snap, _table("t2")))
    assert not movable(b.create_db(FIRST, "z"))
    no_table = b.replace(b.insert(FIRST, snap, []).payload, table=None)
    unknown = b.event(FIRST, EventType.INSERT, no_table, DB, "t")
    assert not movable(unknown)
