"""The checker accepts a correct replica and catches broken ones (its negative tests must fail)."""

from __future__ import annotations

import dataclasses
import itertools

from streamer.testing import Sample, check, table_key
from streamer.testing.checker import BATCH_EVENTS, CUT, MONOTONIC, PASSED, PHANTOM, PREFIX, WATERMARK
from tests.unit.testing.replicas import (
    Run,
    replay_samples,
    state_transfer_samples,
    swappable_pair,
    swapped,
)


def test_in_order_replay_has_no_violations(run: Run) -> None:
    keys = run.history.tables()
    report = check(run.history, replay_samples(run.events, keys))
    assert report.ok, report.summary()
    assert report.samples == len(run.events)


def test_swapping_two_events_of_different_tables_breaks_the_cut(run: Run) -> None:
    first, second, a, b = swappable_pair(run.history)
    events = swapped(run.events, first, second)
    report = check(run.history, replay_samples(events, run.history.tables()))
    assert not report.ok
    cut = [v for v in report.violations if v.check == CUT]
    assert cut, report.summary()
    assert a in cut[0].description and b in cut[0].description
    # the sample after the early event shows it, the advertised id claims it, the other table lags
    # (the lagging table's event was passed: repl.last.id is beyond it, its change does not show)
    assert all(v.check in (CUT, WATERMARK, MONOTONIC, PASSED) for v in report.violations), report.summary()


def test_a_reader_of_one_table_cannot_see_a_cross_table_swap(run: Run) -> None:
    """A limit worth knowing: order across tables is only visible to samples spanning them."""
    first, second, _, b = swappable_pair(run.history)
    report = check(run.history, replay_samples(swapped(run.events, first, second), [b]))
    assert report.ok, report.summary()


def test_state_transferred_replica_rubber_bands(run: Run) -> None:
    keys = run.history.tables()
    report = check(run.history, state_transfer_samples(run.history, keys, step=7))
    assert not report.ok
    assert report.by_check().get(CUT, 0) > 0, report.summary()


def test_phantom_files_and_tables(run: Run) -> None:
    samples = replay_samples(run.events, run.history.tables(), every=50)
    sample = samples[-1]
    key, state = next((k, s) for k, s in sample.tables.items() if s is not None and s.partitions)
    name, files = state.partitions[0]
    forged = dataclasses.replace(
        state, partitions=((name, (*files, ("999999_0", "f00d"))), *state.partitions[1:])
    )
    bad = dataclasses.replace(sample, tables={**sample.tables, key: forged, "nowhere.t": forged})
    report = check(run.history, [*samples[:-1], bad])
    phantoms = {v.obj for v in report.violations if v.check == PHANTOM}
    assert phantoms == {key, "nowhere.t"}
    assert any(v.check == PREFIX and v.obj == key and "999999_0" in v.description for v in report.violations)


def test_reader_going_back_in_time(run: Run) -> None:
    samples = replay_samples(run.events, run.history.tables(), every=20)
    late, early = samples[-1], samples[0]
    back = dataclasses.replace(early, wall_time=late.wall_time + 1, applied_event_ids=late.applied_event_ids)
    report = check(run.history, [late, back])
    assert MONOTONIC in report.by_check(), report.summary()
    other_reader = dataclasses.replace(early, reader="other", wall_time=late.wall_time + 1)
    assert check(run.history, [late, other_reader]).ok  # another reader may be behind


def test_watermark_ahead_or_far_behind(run: Run) -> None:
    h = run.history
    keys = h.tables()
    samples = replay_samples(run.events, keys)
    middle = samples[len(samples) // 2]
    applied = next(iter(middle.applied_event_ids.values()))
    ahead = dataclasses.replace(
        middle, applied_event_ids={d: h.last_event_id for d in middle.applied_event_ids}
    )
    far_behind = dataclasses.replace(middle, applied_event_ids={d: 0 for d in middle.applied_event_ids})
    assert WATERMARK in check(h, [ahead]).by_check()
    assert WATERMARK in check(h, [ahead], batch_events=10**9).by_check()  # never ahead, whatever the batch
    assert WATERMARK in check(h, [far_behind], batch_events=None).by_check()
    # markers per batch: behind by the changes of one batch is allowed, by more is not
    pending = len([e for e in h.change_ids(keys) if 0 < e <= applied])
    assert WATERMARK not in check(h, [far_behind], batch_events=pending + len(keys)).by_check()
    assert WATERMARK in check(h, [far_behind], batch_events=1).by_check()
    # the event in flight: state after `applied`, watermark still at the previous change
    changes = [e for e in h.change_ids(keys) if e <= applied]
    one_behind = dataclasses.replace(
        middle, applied_event_ids={d: changes[-1] - 1 for d in middle.applied_event_ids}
    )
    assert check(h, [one_behind]).ok
    assert WATERMARK in check(h, [one_behind], max_in_flight=0, batch_events=None).by_check()


def test_staleness_is_the_age_of_the_oldest_unapplied_event(run: Run) -> None:
    h = run.history
    keys = h.tables()
    behind = replay_samples(run.events[:100], keys)[-1]
    applied = run.events[99].event_id
    now = float(h.event_times[-1])
    report = check(h, [dataclasses.replace(behind, wall_time=now)])
    assert report.ok, report.summary()
    assert report.worst_lag_events == h.last_event_id - applied
    assert report.worst_staleness_s == now - run.events[100].source.event_time
    explicit = dataclasses.replace(behind, wall_time=now, source_head_event_id=applied + 3)
    assert check(h, [explicit]).worst_lag_events == 3


def test_absent_tables_and_partial_samples(run: Run) -> None:
    h = run.history
    dropped = next(k for k in h.tables() if h.state_at(k, h.last_event_id) is None)
    late = Sample("r", float(h.event_times[-1]), {}, {dropped: None, "never.existed": None})
    assert check(h, [late]).ok
    alive_then = next(c.state for c in h.changes[dropped] if c.state is not None)
    report = check(h, [dataclasses.replace(late, tables={dropped: alive_then, table_key("x", "y"): None})])
    assert report.ok  # an old state alone is a valid (stale) prefix


def test_a_step_of_several_events_may_be_in_flight_but_not_two() -> None:
    """Three ADD_PARTITION of one table in a row are one step for the target (one catalog call, then
    the watermark): its tables may show all three ahead of ``repl.last.id``. Separated by another
    change of the table they are three steps, and the same sample is a watermark violation."""
    from streamer.replay.state import observe
    from streamer.testing import History
    from tests.unit.target import builders as b

    t = b.table("a", "t", ("p",))
    parts = [b.partition(t, str(i)) for i in range(3)]
    adds = [b.add_partition(3 + i, t, [p]) for i, p in enumerate(parts)]
    grouped = [b.create_db(1, "a"), b.create_table(2, t), *adds]
    after = observe(t, {f"p={i}": [] for i in range(3)})
    sample = Sample("r", 0.0, {"a": 2}, {table_key("a", "t"): after})
    history = History.build(grouped)
    assert history.step_of(5) == history.step_of(3) == 3
    assert check(history, [sample]).ok, check(history, [sample]).summary()

    other = b.table("a", "t", ("p",), comment="x")
    split = [b.create_db(1, "a"), b.create_table(2, t), b.add_partition(3, t, [parts[0]]),
             b.alter_table(4, t, other), b.alter_table(5, other, t), b.add_partition(6, t, [parts[1]]),
             b.add_partition(7, t, [parts[2]])]
    history = History.build(split)
    report = check(history, [sample], batch_events=None)  # per-step markers
    assert check(history, [sample], batch_events=BATCH_EVENTS).ok  # per-batch markers: one batch's
    assert WATERMARK in report.by_check(), report.summary()
    caught_up = dataclasses.replace(sample, applied_event_ids={"a": 5})
    assert check(history, [caught_up], batch_events=BATCH_EVENTS).ok


def test_a_table_untouched_since_long_ago_is_not_stale() -> None:
    """Staleness counts from the newest source event the observed state still matches: a target
    whose only table last changed at event 2 is current at head 50."""
    from streamer.replay.state import observe
    from streamer.testing import History
    from tests.unit.target import builders as b

    t = b.table("a", "t")
    events = [b.create_db(1, "a"), b.create_table(2, t), *(b.create_db(i, f"other{i}") for i in range(3, 51))]
    history = History.build(events)
    current = Sample("r", 1_700_000_050.0, {"a": 2}, {table_key("a", "t"): observe(t, {"": []})},
                     source_head_event_id=50)
    report = check(history, [current])
    assert report.ok and report.worst_lag_events == 0, report.summary()
    absent = dataclasses.replace(current, applied_event_ids={}, tables={table_key("a", "t"): None})
    assert check(history, [absent]).worst_lag_events == 50 - 1  # the table is missing: behind event 2


def _lanes_replay(run: Run, ahead: str) -> list[Sample]:
    """A target in ``database`` mode whose lane of database ``ahead`` runs ahead of the others as
    far as the schedule allows; a reader samples every table after each step, and each database
    advertises the last event of its own applied (as ``repl.last.id`` does)."""
    from streamer.target.apply.plan import plan, step_db
    from streamer.target.job.lanes import Consistency, schedule
    from streamer.testing import SourceStateMachine

    sched = schedule(plan(run.events, {}), Consistency.DATABASE)
    dependents, waiting = sched.dependents(), [len(n.after) for n in sched.nodes]
    ready = [i for i, w in enumerate(waiting) if w == 0]
    machine, advertised, samples, clock = SourceStateMachine(), dict[str, int](), [], 0.0
    keys = run.history.tables()
    while ready:
        ready.sort(key=lambda i: (sched.nodes[i].step.db.lower() != ahead, i))
        i = ready.pop(0)
        for event in sched.nodes[i].step.events:
            machine.apply(event)
            advertised[step_db(event).lower()] = event.event_id
        clock = max(clock + 0.001, sched.nodes[i].step.last.source.event_time + 0.5)  # readers' time runs on
        samples.append(Sample(
            reader="r", wall_time=clock,
            applied_event_ids={db: advertised.get(db, 0) for db in {k.split(".", 1)[0] for k in keys}},
            tables={k: machine.state(k) for k in keys},
        ))
        for d in dependents[i]:
            waiting[d] -= 1
            if waiting[d] == 0:
                ready.append(d)
    assert len(samples) == len(sched.nodes)
    return samples


def test_database_scope_accepts_lanes_that_global_scope_rejects(run: Run) -> None:
    """Database lanes show each database as a source prefix, not all databases as one."""
    dbs = sorted({k.split(".", 1)[0] for k in run.history.tables()})
    assert len(dbs) >= 2
    samples = _lanes_replay(run, ahead=dbs[-1])
    per_db = check(run.history, samples, scope="database")
    assert per_db.ok, per_db.summary()
    across = check(run.history, samples, scope="global")
    assert across.by_check().get(CUT, 0) > 0, across.summary()


def test_database_scope_still_catches_a_swap_inside_one_database(run: Run) -> None:
    changed: dict[int, set[str]] = {}
    for key, points in run.history.changes.items():
        for change in points:
            changed.setdefault(change.event_id, set()).add(key)
    pairs = [
        (first, second) for first, second in itertools.pairwise(run.history.event_ids)
        if len(a := changed.get(first, set())) == 1 and len(b := changed.get(second, set())) == 1 and a != b
        and next(iter(a)).split(".")[0] == next(iter(b)).split(".")[0]
    ]
    assert pairs, "the workload has no two adjacent changes of two tables of one database"
    events = swapped(run.events, *pairs[0])
    report = check(run.history, replay_samples(events, run.history.tables()), scope="database")
    assert report.by_check().get(CUT, 0) > 0, report.summary()
