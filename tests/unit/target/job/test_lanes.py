"""Apply lanes: the pure schedule (lanes, barriers) and the runner executing it concurrently."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamer.events.model import (
    AcidWrite,
    AddConstraintsPayload,
    AlterTablePayload,
    CommitTxnPayload,
    Constraint,
    DropFunctionPayload,
    Event,
    EventType,
    OpenTxnPayload,
)
from streamer.metastore.catalog import FENCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier, regrouped
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import Plan, Step, StepKind, plan
from streamer.target.apply.reorder import reorder
from streamer.target.job.lane_runner import LaneRunner
from streamer.target.job.lanes import TXN_LANE, Consistency, Schedule, schedule
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b


def _ancestors(sched: Schedule, i: int) -> set[int]:
    seen: set[int] = set()
    todo = list(sched.nodes[i].after)
    while todo:
        j = todo.pop()
        if j not in seen:
            seen.add(j)
            todo.extend(sched.nodes[j].after)
    return seen


def _commit(event_id: int, txn: int, *dbs: str) -> Event:
    writes = [AcidWrite(db=db, table="t", write_id=1) for db in dbs]
    return b.event(event_id, EventType.COMMIT_TXN, CommitTxnPayload(txn, writes))


def _open(event_id: int, txn: int) -> Event:
    return b.event(event_id, EventType.OPEN_TXN, OpenTxnPayload([txn]))


def _workload(dbs: list[str], per_db: int) -> list[Event]:
    """Interleaved create/alter events of ``per_db`` tables in each database."""
    events: list[Event] = []
    n = 0
    for db in dbs:
        n += 1
        events.append(b.create_db(n, db))
    for i in range(per_db):
        for db in dbs:
            n += 1
            events.append(b.create_table(n, b.table(db, f"t{i}")))
    return events


def test_global_mode_is_one_chain() -> None:
    sched = schedule(plan(_workload(["a", "b"], 2), {}), Consistency.GLOBAL)
    assert [n.after for n in sched.nodes] == [(), (0,), (1,), (2,), (3,), (4,)]
    assert sched.lanes == {"*"} and sched.barriers == ()


def test_database_mode_runs_databases_apart_and_each_in_order() -> None:
    sched = schedule(plan(_workload(["a", "b", "c"], 2), {}), Consistency.DATABASE)
    assert sched.lanes == {"db:a", "db:b", "db:c"}
    by_db: dict[str, list[int]] = {}
    for i, node in enumerate(sched.nodes):
        by_db.setdefault(node.step.db, []).append(i)
        assert len(node.after) <= 1
    for indices in by_db.values():  # each database: a chain in event-id order
        for before, after in itertools.pairwise(indices):
            assert sched.nodes[after].after == (before,)


def test_commit_spanning_databases_is_a_barrier_of_exactly_those_lanes() -> None:
    events = [b.create_db(1, "a"), b.create_db(2, "b"), b.create_db(3, "c"), _open(4, 7),
              b.create_table(5, b.table("a", "t")), b.create_table(6, b.table("b", "t")),
              b.create_table(7, b.table("c", "t")), _commit(8, 7, "a", "b"),
              b.create_table(9, b.table("a", "u")), b.create_table(10, b.table("c", "u"))]
    sched = schedule(plan(events, {}), Consistency.DATABASE)
    ids = [n.step.last_event_id for n in sched.nodes]
    commit = sched.nodes[ids.index(8)]
    assert commit.barrier and commit.lanes == {TXN_LANE, "db:a", "db:b"}
    assert {ids[j] for j in commit.after} == {4, 5, 6}  # open txn, a's and b's previous steps
    assert sched.nodes[ids.index(9)].after == (ids.index(8),)  # a waits for the commit
    assert ids.index(8) not in _ancestors(sched, ids.index(10))  # c does not


def test_cross_database_rename_and_foreign_key_join_lanes() -> None:
    t = b.table("a", "t")
    moved = b.replace(t, db="b")
    fk = Constraint("FOREIGN_KEY", "fk", "c", "t", "id", ref_db="a", ref_table="t", ref_column="id")
    events = [b.create_db(1, "a"), b.create_db(2, "b"), b.create_db(3, "c"), b.create_table(4, t),
              b.alter_table(5, t, moved),
              b.event(6, EventType.ADD_FOREIGNKEY, AddConstraintsPayload([fk]), db="c", table="t")]
    sched = schedule(plan(events, {}), Consistency.DATABASE)
    assert sched.nodes[4].lanes == {"db:a", "db:b"}
    assert sched.nodes[5].lanes == {"db:a", "db:c"}
    assert 4 in _ancestors(sched, 5)


def test_external_tables_sharing_a_location_share_a_lane() -> None:
    one = b.table("a", "e", location="file:///data/shared", table_type="EXTERNAL_TABLE")
    two = b.table("b", "e", location="file:///data/shared/", table_type="EXTERNAL_TABLE")
    events = [b.create_db(1, "a"), b.create_db(2, "b"), b.create_table(3, one), b.create_table(4, two)]
    sched = schedule(plan(events, {}), Consistency.DATABASE)
    assert 2 in _ancestors(sched, 3)


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "txn", "commit", "nodb"]), st.integers(0, 2)),
             min_size=1, max_size=40)
)
def test_every_pair_sharing_a_lane_keeps_event_order(ops: list[tuple[str, int]]) -> None:
    """Whatever the interleaving, two steps that share a lane (or a database's progress) are ordered
    by the schedule, so every topological execution applies each lane in event-id order."""
    events: list[Event] = []
    for i, (what, k) in enumerate(ops, start=1):
        if what == "txn":
            events.append(_open(i, k))
        elif what == "commit":
            events.append(_commit(i, k, *["abcd"[k], "abcd"[k + 1]]))
        elif what == "nodb":  # an event of no database and no transaction: a full barrier
            events.append(b.event(i, EventType.DROP_FUNCTION, DropFunctionPayload(f"f{k}")))
        else:
            events.append(b.create_table(i, b.table(what, f"t{k}{i}")))
    sched = schedule(plan(events, {}), Consistency.DATABASE)
    for j, later in enumerate(sched.nodes):
        above = _ancestors(sched, j)
        for i in range(j):
            earlier = sched.nodes[i]
            joined = earlier.lanes & later.lanes or earlier.step.db == later.step.db
            if joined or earlier.full_barrier or later.full_barrier:
                assert i in above, (earlier, later)


def _alters(first_id: int, tables: list[tuple[str, str]], rounds: int) -> list[Event]:
    """Each table's property ALTERs, interleaved with the other tables' (regrouped: fenced)."""
    events = []
    for i in range(rounds):
        for db, name in tables:
            t = b.table(db, name)
            events.append(b.alter_table(first_id + len(events), t, b.replace(t, parameters={"v": str(i)})))
    return events


def _regrouped(events: list[Event]) -> Plan:
    return reorder(plan(events, {}))


def test_fenced_steps_run_per_table_between_their_lanes_steps() -> None:
    tables = [("a", "t0"), ("a", "t1"), ("a", "t2")]
    events = [b.create_db(1, "a"), *_alters(2, tables, 3)]
    events.append(b.event(len(events) + 1, EventType.DROP_FUNCTION, DropFunctionPayload("f"), db="a"))
    the_plan = _regrouped(events)
    for mode, lane in ((Consistency.GLOBAL, "*"), (Consistency.DATABASE, "db:a")):
        sched = schedule(the_plan, mode)
        fenced = [i for i, n in enumerate(sched.nodes) if n.step.fenced]
        assert len(fenced) == 3  # a table's three ALTERs coalesced into one step
        subs = {next(iter(sched.nodes[i].lanes)) for i in fenced}
        assert subs == {f"{lane}/table:a.{t}" for _, t in tables}
        assert all(sched.nodes[i].after == (0,) for i in fenced)  # after the create, not each other
        last = len(sched.nodes) - 1
        assert set(sched.nodes[last].after) == set(fenced)  # the next step of the lane waits for all
        assert not any(sched.nodes[i].barrier for i in fenced)


def test_a_step_in_event_order_is_not_fenced_and_stays_in_its_lane() -> None:
    events = [b.create_db(1, "a"), *_alters(2, [("a", "t0")], 3), *_alters(5, [("a", "t1")], 3)]
    sched = schedule(_regrouped(events), Consistency.GLOBAL)
    assert sched.lanes == {"*"}  # nothing moved: the order is the source's, no sub-lane


_TABLES = [("a", "t0"), ("a", "t1"), ("b", "t0"), ("b", "t1")]


def _databases(step: Step) -> set[str | None]:
    """The databases a step's events act on (a rename: both of its databases)."""
    out: set[str | None] = set()
    for e in step.events:
        p = e.payload
        out |= {p.before.db, p.after.db} if isinstance(p, AlterTablePayload) else {e.db}
    return out


_TABLE_OP = st.tuples(st.sampled_from(["alter", "add", "drop"]), st.integers(0, len(_TABLES) - 1),
                      st.sampled_from("01"))
_OTHER_OP = st.tuples(st.sampled_from(["barrier", "create", "nodb", "move"]), st.just(0), st.just(""))
_OPS = st.one_of(_TABLE_OP, _TABLE_OP, _TABLE_OP, _OTHER_OP)  # mostly table events: segments to regroup


_INTERLEAVED = [("alter", 0, "0"), ("alter", 1, "0"), ("alter", 0, "1"), ("alter", 1, "1")]  # regrouped


@settings(max_examples=300)
@given(st.lists(_OPS, min_size=1, max_size=30), st.sampled_from(list(Consistency)))
@example([*_INTERLEAVED, ("nodb", 0, "")], Consistency.DATABASE)  # a full barrier after two tables' lanes
@example([*_INTERLEAVED, ("move", 0, "")], Consistency.DATABASE)  # a step of two lanes after them
def test_only_fenced_steps_of_different_tables_of_one_lane_run_unordered(
    ops: list[tuple[str, int, str]], mode: Consistency
) -> None:
    """Whatever a regrouped batch holds, every two steps are ordered by the schedule unless both are
    fenced steps of different tables (their events commute: ``reorder``), and a table's steps keep
    the plan's order, so a topological execution ends where the sequential one does."""
    events: list[Event] = [b.create_db(1, "a"), b.create_db(2, "b")]
    for what, k, value in ops:
        n = len(events) + 1
        t = b.table(*_TABLES[k], ("p",))
        if what == "barrier":  # not movable: ends a segment
            events.append(b.event(n, EventType.DROP_FUNCTION, DropFunctionPayload(f"f{n}"), db="a"))
        elif what == "nodb":  # no database: a full barrier in database mode
            events.append(b.event(n, EventType.DROP_FUNCTION, DropFunctionPayload(f"f{n}")))
        elif what == "move":  # a rename across databases: both databases' lanes at once
            moved = b.table("a", f"m{n}")
            events.append(b.alter_table(n, moved, b.replace(moved, db="b")))
        elif what == "create":
            events.append(b.create_table(n, b.table("b", f"new{n}")))
        elif what == "add":
            events.append(b.add_partition(n, t, [b.partition(t, value)]))
        elif what == "drop":
            events.append(b.drop_partition(n, t, [[value]]))
        else:
            events.append(b.alter_table(n, t, b.replace(t, parameters={"v": str(n)})))
    sched = schedule(_regrouped(events), mode)
    for j, later in enumerate(sched.nodes):
        above = _ancestors(sched, j)
        for i in range(j):
            earlier = sched.nodes[i]
            tables = {(e.db, e.table) for s in (earlier.step, later.step) for e in s.events}
            commute = earlier.step.fenced and later.step.fenced and len(tables) > 1
            shared = (mode is Consistency.GLOBAL or earlier.full_barrier or later.full_barrier
                      or _databases(earlier.step) & _databases(later.step))
            if shared and not commute:
                assert i in above, (earlier, later)


# --- the runner --------------------------------------------------------------------------------


class SlowCatalog:
    """A shared in-memory catalog whose writes take a while; records how many ran at once."""

    def __init__(self, inner: MemoryCatalog, delay: float = 0.02) -> None:
        self.inner = inner
        self.delay = delay
        self.lock = threading.Lock()
        self.active = 0
        self.most = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith(("get_", "list_")):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.active += 1
                self.most = max(self.most, self.active)
            try:
                time.sleep(self.delay)
                with self.lock:
                    return attr(*args, **kwargs)
            finally:
                with self.lock:
                    self.active -= 1

        return call


def _run(
    root: Path, mode: Consistency, events: list[Event], coalesce: bool = False
) -> tuple[MemoryCatalog, SlowCatalog, float]:
    inner = MemoryCatalog()
    slow = SlowCatalog(inner)
    state = TargetState(root / "state")
    (root / "wh").mkdir(parents=True, exist_ok=True)
    paths = TargetPaths(str(root / "wh"), str(root / "ext"))
    applier = Applier(slow, FileCopier(max_workers=2), paths, b.SOURCE_ID, state=state,  # type: ignore[arg-type]
                      coalesce_backlog=coalesce)
    runner = LaneRunner(mode, lambda: slow, workers=4)  # type: ignore[arg-type,return-value]
    started = time.monotonic()
    the_plan = regrouped(applier, plan(events, applier.load_progress(), state.halts()))
    report = runner.run(applier, the_plan, state)
    seconds = time.monotonic() - started
    assert sorted(report.applied) == [e.event_id for e in events] and not report.halted
    return inner, slow, seconds


def test_database_lanes_end_in_the_state_global_order_ends_in(tmp_path: Path) -> None:
    events = _workload(["a", "b", "c", "d"], 5)
    one, one_slow, _ = _run(tmp_path / "global", Consistency.GLOBAL, events)
    four, four_slow, _ = _run(tmp_path / "database", Consistency.DATABASE, events)

    def seen(catalog: MemoryCatalog, root: Path) -> str:  # the same content, whatever the order
        dump = {k: sorted(v.items(), key=repr) if isinstance(v, dict) else v
                for k, v in catalog.dump().items()}
        return repr(dump).replace(str(root), "<root>")

    assert seen(four, tmp_path / "database") == seen(one, tmp_path / "global")
    assert one_slow.most == 1 and four_slow.most > 1  # the lanes really ran at once (no timing asserted)


def test_database_lanes_apply_a_regrouped_backlog_to_the_same_state_lifting_fences(tmp_path: Path) -> None:
    setup = _workload(["a", "b"], 2)
    tables = [(db, f"t{i}") for i in range(2) for db in ("a", "b")]
    alters = []
    for i in range(3):  # each table's property ALTERs, interleaved with the other tables': regrouped
        for db, name in tables:
            t = b.table(db, name)
            event_id = len(setup) + len(alters) + 1
            alters.append(b.alter_table(event_id, t, b.replace(t, parameters={"v": str(i)})))
    one, _, _ = _run(tmp_path / "global", Consistency.GLOBAL, [*setup, *alters])
    lanes, _, _ = _run(tmp_path / "database", Consistency.DATABASE, [*setup, *alters], coalesce=True)
    params = {k: t.parameters for k, t in one.tables.items()}
    assert {k: t.parameters for k, t in lanes.tables.items()} == params
    assert all(FENCE_PARAM not in db.parameters for db in lanes.databases.values())
    assert lanes.calls.count("alter_table") == len(tables) < one.calls.count("alter_table")


def test_a_halted_lane_holds_its_database_only(tmp_path: Path) -> None:
    inner = MemoryCatalog()
    state = TargetState(tmp_path / "state")
    paths = TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext"))
    applier = Applier(inner, FileCopier(), paths, b.SOURCE_ID, state=state)
    missing = b.table("a", "ghost")
    events = [b.create_db(1, "a"), b.create_db(2, "b"),
              b.alter_table(3, missing, b.replace(missing, parameters={"k": "v"})),  # a: table is missing
              b.create_table(4, b.table("a", "t")), b.create_table(5, b.table("b", "t"))]
    halts: list[str] = []
    runner = LaneRunner(Consistency.DATABASE, lambda: inner)
    report = runner.run(applier, plan(events, {}), state, halts.append)
    assert halts == ["a"]  # reported as in global mode (the job publishes it in its watermark)
    assert sorted(report.applied) == [1, 2, 5]
    assert sorted(report.held) == [3, 4] and set(report.halted) == {"a"}
    assert state.halts()["a"].event_id == 3
    assert inner.get_table("b", "t") is not None and inner.get_table("a", "t") is None


def test_global_mode_applies_a_regrouped_backlogs_tables_at_once_to_the_same_state(tmp_path: Path) -> None:
    tables = [("a", f"t{i}") for i in range(4)]
    setup = [b.create_db(1, "a"), *(b.create_table(2 + i, b.table(*t)) for i, t in enumerate(tables))]
    events = [*setup, *_alters(len(setup) + 1, tables, 3)]
    one, one_slow, _ = _run(tmp_path / "sequential", Consistency.GLOBAL, events)
    lanes, lanes_slow, _ = _run(tmp_path / "lanes", Consistency.GLOBAL, events, coalesce=True)
    params = {k: t.parameters for k, t in one.tables.items()}
    assert {k: t.parameters for k, t in lanes.tables.items()} == params
    assert all(FENCE_PARAM not in db.parameters for db in lanes.databases.values())
    assert lanes.calls.count("alter_database") == 2  # the fence, opened once by four lanes; lifted once
    assert one_slow.most == 1 and lanes_slow.most > 1  # the tables' lanes really ran at once


def test_a_failed_table_lane_halts_its_database_from_the_regrouped_start(tmp_path: Path) -> None:
    inner = MemoryCatalog()
    state = TargetState(tmp_path / "state")
    paths = TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext"))
    applier = Applier(inner, FileCopier(), paths, b.SOURCE_ID, state=state, coalesce_backlog=True)
    tables = [("a", "t0"), ("a", "ghost"), ("b", "t0"), ("a", "t1")]
    setup = [b.create_db(1, "a"), b.create_db(2, "b"), b.create_table(3, b.table("a", "t0")),
             b.create_table(4, b.table("b", "t0")), b.create_table(5, b.table("a", "t1"))]
    alters = _alters(6, tables, 2)  # a.ghost is missing on the target: its step fails
    the_plan = regrouped(applier, plan([*setup, *alters], applier.load_progress(), state.halts()))
    assert any(s.fenced for s in the_plan.steps)
    halts: list[str] = []
    report = LaneRunner(Consistency.GLOBAL, lambda: inner).run(applier, the_plan, state, halts.append)
    assert halts == ["a"] and set(report.halted) == {"a"}
    halt = state.halts()["a"]
    first_fenced = min(s.first.event_id for s in the_plan.steps if s.fenced and s.db == "a")
    assert halt.event_id == first_fenced and halt.failed_event_id == 7  # re-read from the regrouped start
    assert inner.get_table("b", "t0").parameters.get("v") == "1"  # b's lane went on
    assert {7, 11} <= set(report.held) and not set(report.held) & {8, 12}


def test_a_voiding_run_abandoned_by_another_tables_halt_finishes_quietly(tmp_path: Path) -> None:
    """Two tables' lanes of one database: one ends its voiding run just after the other's failure
    abandoned the database's runs (``_halt``); ending it must not fail the batch."""
    from streamer.target.apply.runner import PendingRun, VoidingRuns
    from streamer.target.apply.voiding import VoidingRun

    applier = Applier(MemoryCatalog(), FileCopier(), TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext")),
                      b.SOURCE_ID, state=TargetState(tmp_path / "state"))
    t = b.table("a", "t")
    insert, drop = (Step(StepKind.EVENT, (e,), "a") for e in (b.insert(3, t, []), b.drop_table(4, t)))
    runs = VoidingRuns(Plan((insert, drop)), applier)
    pending = PendingRun(VoidingRun(("a", "t"), (3,), 4, frozenset({3}), ()), insert)
    runs._pending["a"] = [pending]
    runs._pin("a")
    assert applier.pins == {"a": 2}
    assert runs.abandon("a") == [pending] and applier.pins == {}
    runs.finish(pending)  # the other lane's end step, after the abandon
    assert applier.pins == {} and runs.ending(drop) is None
