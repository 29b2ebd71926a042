"""Markers per batch (``Applier.batch``): a job killed after any step of a batch restarts after its
last applied step (the journal), re-applies nothing, and ends in the state of applying every event
one by one; a batch's end leaves one ``repl.last.id`` write per database and an empty journal.
Generated event sequences of ``test_plan_coalesce`` (in-memory catalog, real temp dirs)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.events.model import Event
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.target.apply.applier import DEFER_MIN_EVENTS, Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.journal import JOURNAL_FILE
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.apply.sources import SourceRules
from tests.unit.target import builders as b

from .test_apply import make_env
from .test_plan_coalesce import DB, FIRST, SRC, changes, final_state, one_by_one, setup_events
from .test_plan_coalesce import source_files as source_files  # the module's autouse fixture


class Killed(Exception):
    """Stands for a SIGKILL mid-batch (the test's, never the job's)."""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes().filter(lambda e: len(e) >= DEFER_MIN_EVENTS), st.data())
def test_a_kill_after_any_step_resumes_after_it_and_ends_in_the_same_state(
    events: list[Event], data: st.DataObject
) -> None:
    setup = setup_events()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "target"
        expected, expected_files, _ = final_state(root, [one_by_one(setup), one_by_one(events)])
        shutil.rmtree(root)
        env = make_env(root, sources=SourceRules((SRC.as_uri(),)), markers_per_batch=True)
        run_plan(env.applier, one_by_one(setup), env.state)
        first = plan(events, env.applier.load_progress())
        kill_after = data.draw(st.integers(0, len(first.steps) - 1))
        try:
            with env.applier.batch(len(first.event_ids)):
                for step in first.steps[: kill_after + 1]:
                    env.applier.apply(step)
                raise Killed
        except Killed:
            pass
        marker = env.catalog.databases[DB].parameters[LAST_ID_PARAM]
        assert marker == str(FIRST - 1)  # the killed batch wrote no marker
        done = first.steps[kill_after].last_event_id
        restarted = Applier(env.catalog, FileCopier(max_workers=2), env.applier.paths, b.SOURCE_ID,
                            state=env.state, sources=SourceRules((SRC.as_uri(),)), markers_per_batch=True)
        assert restarted.load_progress()[DB] == done  # the journal: no step applied twice
        assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(done)  # caught up at once
        calls = len(env.catalog.calls)
        again = plan(events, restarted.progress)
        assert again.event_ids == tuple(e.event_id for e in events if e.event_id > done)
        report = run_plan(restarted, again, env.state)
        assert not report.halted, report.halted
        assert env.catalog.dump() == expected
        assert env.files() == expected_files
        assert env.catalog.databases[DB].parameters[LAST_ID_PARAM] == str(events[-1].event_id)
        if len(again.event_ids) >= DEFER_MIN_EVENTS:
            assert env.catalog.calls[calls:].count("alter_database") == 1
        assert not (env.state.dir / JOURNAL_FILE).read_text()
