"""Coalescing in the planner: runs of full after-states of one object become their last event.

The properties: the kept events are a subsequence of the planned ones that ends each run with its
last event, runs are maximal and of one object, and applying the coalesced plan ends in exactly the
state that applying every event one by one ends in (in-memory catalog, real temp dirs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer import metrics
from streamer.events.model import (
    AlterPartitionPayload,
    ColumnStatistic,
    Event,
    EventType,
    FileRef,
    TableSnapshot,
    UpdateColumnStatsPayload,
)
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.target.apply.plan import Plan, Step, StepKind, full_state_key, plan
from streamer.target.apply.runner import run_plan
from streamer.target.apply.sources import SourceRules
from streamer.testing import History, Sample, SourceStateMachine, check, table_key
from streamer.testing.checker import BATCH_EVENTS
from tests.unit.target import builders as b

from .test_apply import Env, make_env

DB = "a"
TABLES = ("t", "u")  # both partitioned by p, partitions "1" and "2" exist
COLUMNS = ("id", "name")


def _table(name: str, **params: str) -> TableSnapshot:
    return b.table(DB, name, ("p",), **params)


def alter(event_id: int, name: str, value: str, *, truncate: bool = False) -> Event:
    return b.alter_table(event_id, _table(name), _table(name, v=value), truncate=truncate)


def rename(event_id: int, old: str, new: str) -> Event:
    return b.alter_table(event_id, _table(old), _table(new))


def alter_partition(
    event_id: int, name: str, values: str, value: str, new_values: str | None = None
) -> Event:
    snap = _table(name)
    before = b.partition(snap, values)
    after = b.partition(snap, new_values or values)
    after = dataclasses.replace(after, parameters={"v": value})
    return b.event(
        event_id, EventType.ALTER_PARTITION, AlterPartitionPayload(snap, before, after), DB, name
    )


def stats(event_id: int, name: str, columns: tuple[str, ...], value: int, part: str | None = None) -> Event:
    kind = EventType.UPDATE_PARTITION_COLUMN_STAT if part else EventType.UPDATE_TABLE_COLUMN_STAT
    payload = UpdateColumnStatsPayload(
        DB,
        name,
        [ColumnStatistic(column=c, type="bigint", kind="LONG", num_nulls=value) for c in columns],
        partition_values=[part] if part else [],
        is_table_level=part is None,
    )
    return b.event(event_id, kind, payload, DB, name)


def setup_events() -> list[Event]:
    """Database a, tables t and u with partitions p=1 and p=2: what the runs below change."""
    out = [b.create_db(1, DB)]
    for name in TABLES:
        snap = _table(name)
        out.append(b.create_table(len(out) + 1, snap))
        out.append(b.add_partition(len(out) + 1, snap, [b.partition(snap, "1"), b.partition(snap, "2")]))
    return out


FIRST = len(setup_events()) + 1
MAX_EVENTS = 25
SRC = Path(tempfile.gettempdir()) / f"streamer-test-coalesce-{os.getpid()}"  # source files of INSERTs


@st.composite
def changes(draw: st.DrawFn) -> list[Event]:
    """Events of few objects, so that runs of one object are frequent, broken by other kinds."""
    out: list[Event] = []
    for event_id in range(FIRST, FIRST + draw(st.integers(1, MAX_EVENTS))):
        name = draw(st.sampled_from(TABLES))
        value = str(draw(st.integers(0, 3)))
        kind = draw(
            st.sampled_from(["alter", "alter", "part", "part", "stats", "stats", "pstats", "insert", "other"])
        )
        if kind == "alter":
            out.append(alter(event_id, name, value, truncate=draw(st.booleans())))
        elif kind == "part":
            out.append(alter_partition(event_id, name, draw(st.sampled_from("12")), value))
        elif kind in ("stats", "pstats"):
            cols = tuple(sorted(draw(st.sets(st.sampled_from(COLUMNS), min_size=1))))
            part = draw(st.sampled_from("12")) if kind == "pstats" else None
            out.append(stats(event_id, name, cols, int(value), part))
        elif kind == "insert":  # real files, so that a truncate lost in a run would show
            part = draw(st.sampled_from("12"))
            out.append(b.insert(event_id, _table(name), [source_file(event_id)], values=[part]))
        else:  # an event of another kind between the runs
            snap = _table(name)
            out.append(b.add_partition(event_id, snap, [b.partition(snap, str(event_id))]))
    return out


def source_file(event_id: int) -> FileRef:
    content = f"row {event_id}\n".encode()
    return FileRef(
        uri=f"file://{SRC}/{event_id}.txt",
        checksum=hashlib.sha256(content).hexdigest(),
        checksum_algorithm="sha256",
        size=len(content),
    )


@pytest.fixture(scope="module", autouse=True)
def source_files() -> Iterator[None]:
    SRC.mkdir(parents=True, exist_ok=True)
    for event_id in range(FIRST, FIRST + MAX_EVENTS):
        (SRC / f"{event_id}.txt").write_bytes(f"row {event_id}\n".encode())
    yield
    shutil.rmtree(SRC, ignore_errors=True)


def one_by_one(events: list[Event]) -> Plan:
    """The reference: every event its own step, as before coalescing."""
    return Plan(steps=tuple(Step(StepKind.EVENT, (e,), e.db or "") for e in events))


def final_state(root: Path, plans: list[Plan]) -> tuple[dict[str, object], dict[str, bytes], list[str]]:
    env: Env = make_env(root, sources=SourceRules((SRC.as_uri(),)))  # files live outside their tables
    calls_before = 0
    for p in plans:
        calls_before = len(env.catalog.calls)
        report = run_plan(env.applier, p, env.state)
        assert not report.halted, report.halted
    return env.catalog.dump(), env.files(), env.catalog.calls[calls_before:]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes())
def test_coalesced_plan_ends_in_the_state_of_applying_every_event(events: list[Event]) -> None:
    setup = setup_events()
    coalesced = plan(events, {DB: FIRST - 1})
    with tempfile.TemporaryDirectory() as tmp:  # one root for both, so locations compare equal
        root = Path(tmp) / "target"
        expected, expected_files, every_calls = final_state(root, [one_by_one(setup), one_by_one(events)])
        shutil.rmtree(root)
        got, got_files, coalesced_calls = final_state(root, [one_by_one(setup), coalesced])
    assert got == expected
    assert got_files == expected_files
    assert got["databases"][DB].parameters[LAST_ID_PARAM] == str(events[-1].event_id)  # type: ignore[index]
    assert len(coalesced_calls) <= len(every_calls)


@settings(deadline=None)  # pure, but a loaded machine must not fail it
@given(changes())
def test_kept_events_are_a_subsequence_ending_each_run_with_its_last(events: list[Event]) -> None:
    result = plan(events, {DB: FIRST - 1})
    assert result.event_ids == tuple(e.event_id for e in events)  # nothing lost, nothing reordered
    kept = [i for s in result.steps for i in s.event_ids if i not in s.superseded]
    assert kept == sorted(set(kept))
    assert sorted(set(kept) | set(result.coalesced)) == list(result.event_ids)
    assert not set(kept) & set(result.coalesced)
    for step in result.steps:
        keys = {full_state_key(e) for e in step.events}
        if step.kind is StepKind.COALESCED:
            assert len(step.events) > 1 and len(keys) == 1 and None not in keys
            assert step.superseded == step.event_ids[:-1]
        else:
            assert step.superseded == ()
    for before, after in zip(result.steps, result.steps[1:], strict=False):  # runs are maximal
        key = full_state_key(before.last)
        assert key is None or key != full_state_key(after.first)


def test_ten_canary_bumps_become_one_alter_table() -> None:
    bumps = [alter(FIRST + i, "t", str(i)) for i in range(10)]
    result = plan(bumps, {DB: FIRST - 1})
    ids = tuple(e.event_id for e in bumps)
    assert [(s.kind, s.event_ids) for s in result.steps] == [(StepKind.COALESCED, ids)]
    assert result.coalesced == tuple(e.event_id for e in bumps[:-1])


def test_runs_break_on_other_objects_renames_truncates_and_other_columns() -> None:
    f = FIRST
    events = [
        alter(f, "t", "1"),
        alter(f + 1, "u", "1"),  # another table
        alter(f + 2, "t", "2"),
        rename(f + 3, "t", "t2"),  # a rename changes the key
        alter(f + 4, "u", "2"),
        alter(f + 5, "u", "3", truncate=True),  # a truncate also clears files
        stats(f + 6, "u", ("id",), 1),
        stats(f + 7, "u", ("id", "name"), 2),  # other columns than the event before
        stats(f + 8, "u", ("id", "name"), 3),
        alter_partition(f + 9, "u", "1", "x"),
        alter_partition(f + 10, "u", "1", "y", new_values="3"),  # a partition rename
        alter_partition(f + 11, "u", "2", "x"),
        alter_partition(f + 12, "u", "2", "y"),
        stats(f + 13, "u", ("id",), 1, part="2"),
        stats(f + 14, "u", ("id",), 2, part="1"),  # another partition
    ]
    result = plan(events, {DB: f - 1})
    assert [s.event_ids for s in result.steps if s.kind is StepKind.COALESCED] == [
        (f + 7, f + 8),
        (f + 11, f + 12),
    ]
    assert result.coalesced == (f + 7, f + 11)
    assert all(len(s.events) == 1 for s in result.steps if s.kind is StepKind.EVENT)


def test_a_coalesced_step_is_one_catalog_write_and_advances_to_its_last_event(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.run(setup_events())
    bumps = [alter(FIRST + i, "t", str(i)) for i in range(10)]
    counter = _coalesced_total()
    calls = len(env.catalog.calls)
    report = run_plan(env.applier, plan(bumps, env.applier.load_progress()), env.state)
    assert report.applied == [e.event_id for e in bumps]
    assert report.coalesced == [e.event_id for e in bumps[:-1]]
    assert env.catalog.calls[calls:].count("alter_table") == 1
    assert env.catalog.tables[(DB, "t")].parameters["v"] == "9"
    assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(bumps[-1].event_id)
    assert _coalesced_total() - counter == 9


def _coalesced_total() -> float:
    return metrics.REGISTRY.get_sample_value("streamer_target_events_coalesced_total") or 0.0


def test_a_failing_coalesced_step_halts_at_its_first_event_and_names_the_run(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.run(setup_events())
    bumps = [alter(FIRST + i, "gone", str(i)) for i in range(3)]  # a table the target does not have
    report = run_plan(env.applier, plan(bumps, env.applier.load_progress()), env.state)
    halt = report.halted[DB]
    assert halt.event_id == FIRST
    assert f"coalesced run of events {FIRST}..{FIRST + 2}, applied as event {FIRST + 2}" in halt.cause
    assert report.held == [e.event_id for e in bumps] and report.coalesced == []
    assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(FIRST - 1)


@pytest.mark.parametrize("truncate", [False, True])
def test_a_single_full_state_event_stays_an_ordinary_step(truncate: bool) -> None:
    result = plan([alter(FIRST, "t", "1", truncate=truncate)], {DB: FIRST - 1})
    assert [s.kind for s in result.steps] == [StepKind.EVENT] and result.coalesced == ()


@settings(max_examples=60, deadline=None)
@given(changes())
def test_readers_of_a_coalesced_replica_see_prefixes_and_an_honest_watermark(events: list[Event]) -> None:
    """The checker's view: the source model fed what the applier executes (a coalesced run: its last
    event only), sampled at every step boundary and in every step's window between its catalog call
    and its ``repl.last.id`` write, where the whole run is in flight (one step: ``History.step_of``)."""
    setup = setup_events()
    history = History.build([*setup, *events])
    keys = [table_key(DB, t) for t in TABLES]
    machine = SourceStateMachine()
    for event in setup:
        machine.apply(event)
    samples: list[Sample] = []
    watermark = FIRST - 1
    for n, step in enumerate(plan(events, {DB: FIRST - 1}).steps):
        for event in step.events:
            if event.event_id not in step.superseded:
                machine.apply(event)
        wall = float(step.last.source.event_time) + n / 1000
        tables = {k: machine.state(k) for k in keys}
        samples.append(Sample("r", wall, {DB: watermark}, tables))  # the catalog call done, the id not yet
        watermark = step.last_event_id
        samples.append(Sample("r", wall + 0.0001, {DB: watermark}, tables))
    assert check(history, samples).violations == []


def test_mid_step_a_coalesced_run_is_one_step_in_flight_but_not_two() -> None:
    """Bumps 2 and 3 applied as one call: a reader between that call and the ``repl.last.id`` write
    sees bump 3 with the watermark before bump 2 (one step in flight: fine), never before bump 1,
    which was a step of its own (an ALTER_PARTITION of another table broke the run)."""
    setup = setup_events()
    f = FIRST
    events = [alter(f, "t", "1"), alter_partition(f + 1, "u", "1", "x"), alter(f + 2, "t", "2"),
              alter(f + 3, "t", "3")]
    assert [s.event_ids for s in plan(events, {DB: f - 1}).steps] == [(f,), (f + 1,), (f + 2, f + 3)]
    history = History.build([*setup, *events])
    machine = SourceStateMachine()
    for event in [*setup, events[0], events[1], events[3]]:
        machine.apply(event)
    key = table_key(DB, "t")

    def mid(watermark: int) -> Sample:
        return Sample("r", 1.0, {DB: watermark}, {key: machine.state(key)})

    assert check(history, [mid(f + 1)], batch_events=BATCH_EVENTS).violations == []
    # with a marker per step (a small batch); a batch's markers may trail by the batch (the default)
    assert [v.check for v in check(history, [mid(f - 1)], batch_events=None).violations] == ["watermark"]
    assert check(history, [mid(f - 1)], batch_events=BATCH_EVENTS).violations == []
