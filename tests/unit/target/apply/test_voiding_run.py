"""A run from an INSERT to the later event that replaces or drops what it wrote is one step, and the
INSERTs it voids are not applied (issue 25): a lagging target never needs files that a Hive 2.3
overwrite deleted (Hive 2.3 recycles none), and the run ends in the state of applying every event.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import Event, FileRef
from streamer.target.apply.plan import StepKind, plan
from streamer.target.apply.sources import SourceRules
from tests.unit.target import builders as b

from .test_apply import Env
from .test_plan_coalesce import (
    DB,
    FIRST,
    MAX_EVENTS,
    SRC,
    TABLES,
    _table,
    alter_partition,
    final_state,
    one_by_one,
    rename,
    setup_events,
    source_file,
    source_files,  # noqa: F401 - the module's source files (autouse fixture)
    stats,
)


def insert(
    event_id: int, name: str, part: str, *, replace: bool = False, file: FileRef | None = None
) -> Event:
    return b.insert(event_id, _table(name), [file or source_file(event_id)], values=[part], replace=replace)


def test_an_insert_and_its_later_overwrite_are_one_step_without_the_insert() -> None:
    events = [
        insert(FIRST, "t", "1"),
        stats(FIRST + 1, "t", ("id",), 1, "1"),
        insert(FIRST + 2, "t", "2"),  # another partition: applied
        insert(FIRST + 3, "t", "1"),
        insert(FIRST + 4, "t", "1", replace=True),
        insert(FIRST + 5, "t", "1"),  # after the overwrite: its own step
    ]
    result = plan(events, {DB: FIRST - 1})
    run, last = result.steps
    assert run.kind is StepKind.RUN and run.event_ids == tuple(range(FIRST, FIRST + 5))
    assert run.skip == (FIRST, FIRST + 3) == result.coalesced
    assert [e.event_id for e in run.executed] == [FIRST + 1, FIRST + 2, FIRST + 4]
    assert last.event_ids == (FIRST + 5,)


def test_no_run_across_a_rename_another_database_or_without_a_voiding_event() -> None:
    cases = [
        [insert(FIRST, "t", "1"), rename(FIRST + 1, "t", "v"), insert(FIRST + 2, "v", "1", replace=True)],
        [insert(FIRST, "t", "1"), b.create_db(FIRST + 1, "other"), insert(FIRST + 2, "t", "1", replace=True)],
        [insert(FIRST, "t", "1"), insert(FIRST + 1, "t", "2", replace=True)],  # another partition
        [insert(FIRST, "t", "1"), insert(FIRST + 1, "u", "1", replace=True)],
    ]
    for events in cases:
        kinds = {s.kind for s in plan(events, {DB: FIRST - 1}).steps}
        assert StepKind.RUN not in kinds, events
    transactional = b.insert(FIRST, _table("t", transactional="true"), [source_file(FIRST)], values=["1"])
    then = insert(FIRST + 1, "t", "1", replace=True)
    assert StepKind.RUN not in {s.kind for s in plan([transactional, then], {DB: FIRST - 1}).steps}


def _env(root: Path) -> Env:
    from .test_apply import make_env

    return make_env(root, sources=SourceRules((SRC.as_uri(),)))


def test_an_insert_whose_files_an_overwrite_deleted_applies_as_part_of_the_run(tmp_path: Path) -> None:
    gone = FileRef(f"file://{SRC}/gone.txt", "0" * 64, "sha256", 3)  # deleted before the target copied it
    env = _env(tmp_path / "target")
    assert env.run(setup_events()) == list(range(1, FIRST))
    alone = env.run([insert(FIRST, "t", "1", file=gone)])
    assert alone == [] and DB in env.state.halts()  # without the overwrite it halts: nothing to copy
    env = _env(tmp_path / "again")
    env.run(setup_events())
    events = [insert(FIRST, "t", "1", file=gone), insert(FIRST + 1, "t", "1", replace=True)]
    assert env.run(events) == [FIRST, FIRST + 1] and not env.state.halts()
    files = {k: v for k, v in env.files().items() if "p=1" in k}
    assert list(files.values()) == [f"row {FIRST + 1}\n".encode()], files


def test_a_drop_of_the_partition_voids_its_inserts(tmp_path: Path) -> None:
    gone = FileRef(f"file://{SRC}/gone.txt", "0" * 64, "sha256", 3)
    snap = _table("t")
    events = [insert(FIRST, "t", "1", file=gone), b.drop_partition(FIRST + 1, snap, [["1"]])]
    result = plan(events, {DB: FIRST - 1})
    assert [s.kind for s in result.steps] == [StepKind.RUN] and result.coalesced == (FIRST,)
    env = _env(tmp_path / "target")
    env.run(setup_events())
    assert env.run(events) == [FIRST, FIRST + 1] and not env.state.halts()


RUNS_SEEN: list[int] = []  # the property below must meet runs, or it proves nothing


@st.composite
def writes(draw: st.DrawFn) -> list[Event]:
    out: list[Event] = []
    for event_id in range(FIRST, FIRST + draw(st.integers(1, MAX_EVENTS))):
        name = draw(st.sampled_from(TABLES))
        part = draw(st.sampled_from("12"))
        kind = draw(st.sampled_from(["insert", "insert", "replace", "replace", "part", "stats"]))
        if kind in ("insert", "replace"):
            out.append(insert(event_id, name, part, replace=kind == "replace"))
        elif kind == "part":
            out.append(alter_partition(event_id, name, part, str(event_id)))
        else:
            out.append(stats(event_id, name, ("id",), event_id, part))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes())
def test_runs_end_in_the_state_of_applying_every_event(events: list[Event]) -> None:
    setup = setup_events()
    planned = plan(events, {DB: FIRST - 1})
    assert planned.event_ids == tuple(e.event_id for e in events)  # nothing lost, nothing reordered
    for step in planned.steps:
        if step.kind is StepKind.RUN:  # a run ends with the event that voids each INSERT it skips
            assert step.skip and step.last.event_id not in step.skip
            RUNS_SEEN.append(len(step.events))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "target"
        expected, expected_files, _ = final_state(root, [one_by_one(setup), one_by_one(events)])
        shutil.rmtree(root)
        got, got_files, _ = final_state(root, [one_by_one(setup), planned])
    assert got == expected
    assert got_files == expected_files


def test_the_property_met_runs() -> None:
    assert RUNS_SEEN, "no generated sequence formed a run"
