"""The planner: order, filtering, grouping (pure; hypothesis properties)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import (
    CommitTxnPayload,
    CreateFunctionPayload,
    DropFunctionPayload,
    Event,
    EventType,
    FunctionSnapshot,
    ProgressPayload,
)
from streamer.target.apply.plan import GLOBAL_DB, StepKind, plan, step_db
from tests.unit.target import builders as b

DBS = ["a", "b"]
TABLES = ["t", "u"]


@st.composite
def one_event(draw: st.DrawFn, event_id: int) -> Event:
    db = draw(st.sampled_from(DBS))
    name = draw(st.sampled_from(TABLES))
    kind = draw(
        st.sampled_from(
            [
                "add",
                "add",
                "add",
                "droppart",
                "droppart",
                "create",
                "drop",
                "insert",
                "db",
                "dropdb",
                "txn",
                "progress",
                "fn",
                "dropfn",
                "external",
            ]
        )
    )
    snap = b.table(db, name, ("p",))
    if kind == "add":
        return b.add_partition(event_id, snap, [b.partition(snap, str(event_id))])
    if kind == "droppart":
        return b.drop_partition(event_id, snap, [[str(event_id % 7)]])
    if kind == "create":
        return b.create_table(event_id, snap)
    if kind == "external":
        return b.create_table(event_id, b.table(db, name, table_type="EXTERNAL_TABLE"))
    if kind == "drop":
        return b.drop_table(event_id, snap)
    if kind == "insert":
        return b.insert(event_id, snap, [], values=["1"])
    if kind == "db":
        return b.create_db(event_id, db)
    if kind == "dropdb":
        return b.drop_db(event_id, db)
    if kind == "txn":
        return b.event(event_id, EventType.COMMIT_TXN, CommitTxnPayload(txn_id=event_id))
    if kind == "fn":
        return b.event(
            event_id,
            EventType.CREATE_FUNCTION,
            CreateFunctionPayload(FunctionSnapshot(name="f", db=db, class_name="C")),
            db=db,
        )
    if kind == "dropfn":
        return b.event(event_id, EventType.DROP_FUNCTION, DropFunctionPayload("f"), db=db)
    return b.event(event_id, EventType.PROGRESS, ProgressPayload(event_id, event_id + 5))


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[Event], dict[str, int]]:
    ids = draw(st.lists(st.integers(1, 60), max_size=30))
    events = [draw(one_event(i)) for i in sorted(set(ids))]
    events += draw(st.lists(st.sampled_from(events), max_size=3)) if events else []  # redelivery
    events = draw(st.permutations(events))
    applied = draw(st.dictionaries(st.sampled_from([*DBS, GLOBAL_DB]), st.integers(0, 60), max_size=3))
    return list(events), applied


@given(batches())
def test_plan_keeps_order_never_loses_never_duplicates(batch: tuple[list[Event], dict[str, int]]) -> None:
    events, applied = batch
    result = plan(events, applied)
    planned = result.event_ids
    assert list(planned) == sorted(planned)
    assert len(planned) == len(set(planned))
    expected = {
        e.event_id
        for e in events
        if e.event_type is not EventType.PROGRESS and e.event_id > applied.get(step_db(e), 0)
    }
    assert set(planned) == expected
    accounted = set(planned) | set(result.already_applied) | set(result.progress)
    assert accounted == {e.event_id for e in events}


@given(batches())
def test_only_consecutive_same_table_partition_events_merge(
    batch: tuple[list[Event], dict[str, int]],
) -> None:
    events, applied = batch
    result = plan(events, applied)
    for step in result.steps:
        assert all(step_db(e) == step.db for e in step.events)
        if step.kind is StepKind.EVENT:
            assert len(step.events) == 1
        elif step.kind in (StepKind.ADD_PARTITIONS, StepKind.DROP_PARTITIONS):
            assert len(step.events) > 1
            merged = {
                StepKind.ADD_PARTITIONS: EventType.ADD_PARTITION,
                StepKind.DROP_PARTITIONS: EventType.DROP_PARTITION,
            }
            assert {e.event_type for e in step.events} == {merged[step.kind]}
            assert len({(e.db, e.table) for e in step.events}) == 1
        elif step.kind is StepKind.COALESCED:  # runs of full after-states: test_plan_coalesce.py
            assert len(step.events) > 1 and len({(e.db, e.table, e.event_type) for e in step.events}) == 1
        else:
            first, last = step.first, step.last
            assert (first.event_type, last.event_type) in {
                (EventType.CREATE_TABLE, EventType.DROP_TABLE),
                (EventType.CREATE_DATABASE, EventType.DROP_DATABASE),
                (EventType.CREATE_FUNCTION, EventType.DROP_FUNCTION),
            }
            assert len({(e.db, e.table) for e in step.events}) == 1
    # merged steps are contiguous in the planned sequence: no event of another step falls between
    flat = [s.event_ids for s in result.steps]
    for i in range(1, len(flat)):
        assert flat[i - 1][-1] < flat[i][0]


def test_add_partitions_coalesce_and_break_on_other_tables() -> None:
    t, u = b.table("a", "t", ("p",)), b.table("a", "u", ("p",))
    events = [
        b.add_partition(1, t, [b.partition(t, "1")]),
        b.add_partition(2, t, [b.partition(t, "2")]),
        b.add_partition(3, u, [b.partition(u, "1")]),
        b.add_partition(4, t, [b.partition(t, "3")]),
    ]
    steps = plan(events, {}).steps
    assert [(s.kind, s.event_ids) for s in steps] == [
        (StepKind.ADD_PARTITIONS, (1, 2)),
        (StepKind.EVENT, (3,)),
        (StepKind.EVENT, (4,)),
    ]


def test_drop_partitions_of_one_table_in_a_row_are_one_step() -> None:
    """Hive 2.x logs one DROP_PARTITION per partition of one ``ALTER TABLE ... DROP PARTITION``."""
    t, u = b.table("a", "t", ("p",)), b.table("a", "u", ("p",))
    events = [
        b.drop_partition(1, t, [["1"]]),
        b.drop_partition(2, t, [["2"], ["3"]]),
        b.add_partition(3, t, [b.partition(t, "4")]),
        b.drop_partition(4, t, [["4"]]),
        b.drop_partition(5, u, [["1"]]),
    ]
    steps = plan(events, {}).steps
    assert [(s.kind, s.event_ids) for s in steps] == [
        (StepKind.DROP_PARTITIONS, (1, 2)),
        (StepKind.EVENT, (3,)),
        (StepKind.EVENT, (4,)),
        (StepKind.EVENT, (5,)),
    ]


def test_applied_filter_is_per_database_and_transactions_use_the_global_pseudo_db() -> None:
    events = [
        b.create_db(5, "a"),
        b.create_db(6, "b"),
        b.event(7, EventType.COMMIT_TXN, CommitTxnPayload(txn_id=1)),
    ]
    result = plan(events, {"a": 5, GLOBAL_DB: 7})
    assert result.event_ids == (6,)
    assert result.already_applied == (5, 7)


def test_held_databases_and_progress() -> None:
    events = [
        b.create_db(1, "a"),
        b.create_db(2, "b"),
        b.event(3, EventType.PROGRESS, ProgressPayload(3, 99)),
    ]
    result = plan(events, {}, halted={"a"})
    assert result.event_ids == (2,) and result.held == (1,) and result.progress == (3,)
    assert result.source_head == 99


def test_create_drop_collapses_only_when_contiguous_and_managed() -> None:
    t = b.table("a", "t", ("p",))
    run = [
        b.create_table(1, t),
        b.add_partition(2, t, [b.partition(t, "1")]),
        b.insert(3, t, [], values=["1"]),
        b.drop_table(4, t),
    ]
    steps = plan(run, {}).steps
    assert [(s.kind, s.event_ids) for s in steps] == [(StepKind.COLLAPSED, (1, 2, 3, 4))]
    interleaved = [*run[:2], b.create_db(5, "b"), *run[2:]]
    interleaved = [
        b.replace(e, source=b.replace(e.source, event_id=i + 1)) for i, e in enumerate(interleaved)
    ]
    assert all(s.kind is not StepKind.COLLAPSED for s in plan(interleaved, {}).steps)
    ext = b.table("a", "t", table_type="EXTERNAL_TABLE")
    assert all(
        s.kind is not StepKind.COLLAPSED
        for s in plan([b.create_table(1, ext), b.drop_table(2, ext)], {}).steps
    )


def test_progress_record_sharing_an_event_id_never_hides_the_event() -> None:
    from streamer.events.model import DatabasePayload, DatabaseSnapshot, Event, ProgressPayload, Source

    real = Event(
        Source("s", 7, 100), EventType.CREATE_DATABASE, DatabasePayload(DatabaseSnapshot("db")), db="db"
    )
    progress = Event(Source("s", 7, 100), EventType.PROGRESS, ProgressPayload(7, 9))
    for batch in ([progress, real], [real, progress]):
        result = plan(batch, {})
        assert result.event_ids == (7,)
        assert result.source_head == 9
        assert result.duplicates == ()
