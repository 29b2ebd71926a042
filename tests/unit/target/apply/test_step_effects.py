"""A batch's modes as rewrites of a step's effect list (``step_effects.around``), read as data.

Deferred markers turn the step's marker into a journal line; a regrouped step (``--coalesce-backlog``)
opens a fence before anything else and journals nothing; a pending voiding run pins the marker before
its start; a step out of order outside a deferring batch is refused before any effect. The property
runs every step of real regrouped backlogs (``reorder``) through every mode.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.errors import ApplyError
from streamer.events.model import DatabaseSnapshot, Event
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.target.apply.effects import (
    ANY_OBJECT,
    Advance,
    CreateTable,
    Effect,
    FenceDatabase,
    ForgetDatabase,
    ForgetTable,
    ForgetTables,
    Refuse,
    SyncJournal,
)
from streamer.target.apply.plan import Step, StepKind, plan
from streamer.target.apply.reorder import reorder
from streamer.target.apply.step_effects import StepMode, around, changed_objects, decided
from tests.unit.target import builders as b

from .test_decide import DictView
from .test_reorder import backlog

DB = "sales"
OWNED = DatabaseSnapshot(name=DB, parameters={REPL_SOURCE_PARAM: b.SOURCE_ID, LAST_ID_PARAM: "9"})
FENCED = DatabaseSnapshot(name=DB, parameters={**OWNED.parameters, FENCE_PARAM: "5"})
DECIDED: list[Effect] = [ForgetTable("x", "y")]  # stands for whatever the handlers decided


def _step(*events: Event, fenced: bool = False) -> Step:
    return Step(StepKind.EVENT, tuple(events), DB, fenced=fenced)


def test_a_step_outside_a_deferring_batch_ends_in_its_marker_reusing_the_snapshot_it_read() -> None:
    step = _step(b.insert(12, b.table(DB, "t"), []))
    out = around(DictView(dbs=[OWNED]), step, DECIDED, StepMode(OWNED))
    assert out == [*DECIDED, Advance(DB, 12, db=OWNED)]


def test_a_deferring_batch_syncs_the_journal_first_and_journals_the_marker() -> None:
    step = _step(b.insert(12, b.table(DB, "t"), []))
    out = around(DictView(dbs=[OWNED]), step, DECIDED, StepMode(OWNED, deferring=True))
    assert out == [SyncJournal(frozenset({(DB, "t")})), *DECIDED, Advance(DB, 12, deferred=True, db=OWNED)]


def test_a_regrouped_step_opens_the_fence_before_anything_and_journals_nothing() -> None:
    step = _step(b.insert(12, b.table(DB, "t"), []), fenced=True)
    out = around(DictView(dbs=[OWNED]), step, DECIDED, StepMode(OWNED, deferring=True))
    assert out[0] == FenceDatabase(DB, OWNED, 12, opening=True)
    assert out[-1] == Advance(DB, 12, deferred=True, journaled=False, progressed=False)


def test_a_database_found_fenced_is_noted_not_opened_and_its_steps_are_not_journaled() -> None:
    step = _step(b.insert(12, b.table(DB, "t"), []))
    out = around(DictView(dbs=[FENCED]), step, DECIDED, StepMode(FENCED, deferring=True))
    assert out[0] == FenceDatabase(DB, FENCED, 12, opening=False)
    assert isinstance(out[-1], Advance) and not out[-1].journaled


def test_a_regrouped_step_outside_a_deferring_batch_is_refused_before_any_effect() -> None:
    step = _step(b.insert(12, b.table(DB, "t"), []), fenced=True)
    out = around(DictView(dbs=[OWNED]), step, DECIDED, StepMode(OWNED))
    assert len(out) == 1 and isinstance(out[0], Refuse)
    assert isinstance(out[0].error, ApplyError) and out[0].error.event_id == 12


def test_a_pending_voiding_run_pins_the_marker_before_its_start() -> None:
    step = _step(b.insert(12, b.table(DB, "t"), []))
    out = around(DictView(dbs=[OWNED]), step, DECIDED, StepMode(OWNED, pin=10))
    assert out[-1] == Advance(DB, 10, db=OWNED)


def test_a_step_that_changes_its_database_forgets_it_and_reads_it_again_for_the_marker() -> None:
    created = _step(b.create_db(12, DB))
    out = around(DictView(dbs=[OWNED]), created, DECIDED, StepMode(OWNED))
    assert out == [*DECIDED, ForgetDatabase(DB), Advance(DB, 12)]  # a database event changes no table
    assert changed_objects(created) == {ANY_OBJECT}
    dropped = _step(b.drop_db(13, DB))
    out = around(DictView(dbs=[OWNED]), dropped, DECIDED, StepMode(OWNED))
    assert out == [*DECIDED, ForgetDatabase(DB), ForgetTables(), Advance(DB, 13)]


def test_a_drop_forgets_its_own_table_and_a_rename_both_names() -> None:
    snap = b.table(DB, "t")
    dropped = around(DictView(dbs=[OWNED]), _step(b.drop_table(12, snap)), [], StepMode(OWNED))
    assert dropped[:-1] == [ForgetTable(DB, "t")]
    renamed = b.alter_table(13, snap, b.replace(snap, name="u"))
    out = around(DictView(dbs=[OWNED]), _step(renamed), [], StepMode(OWNED, deferring=True))
    assert out[0] == SyncJournal(frozenset({(DB, "t"), (DB, "u")}))
    assert out[1:-1] == [ForgetTable(DB, "t"), ForgetTable(DB, "u")]


def test_the_handlers_decide_the_step_and_the_mode_only_wraps_it() -> None:
    view = DictView(dbs=[OWNED])
    step = _step(b.create_table(12, b.table(DB, "t")))
    inner = decided(view, step)
    assert any(isinstance(e, CreateTable) for e in inner)
    out = around(view, step, inner, StepMode(OWNED, deferring=True))
    assert out[1:-1] == inner


@settings(max_examples=60, deadline=None)
@given(events=backlog(), deferring=st.booleans(), found_fenced=st.booleans(),
       already=st.booleans(), pin=st.one_of(st.none(), st.integers(0, 10_000)))
def test_every_mode_keeps_the_decided_effects_whole_and_ends_in_one_bounded_marker(
    events: list[Event], deferring: bool, found_fenced: bool, already: bool, pin: int | None
) -> None:
    """For every step of a regrouped backlog and every mode: the decided effects are kept whole and in
    order, between the mode's effects before and the marker after; exactly one marker, never past
    the step or the pin; a fenced database's step is never journaled and its progress waits for the
    batch's end; a step out of order outside a deferring batch does nothing but refuse."""
    db = FENCED if found_fenced else OWNED
    view = DictView(dbs=[db])
    for step in reorder(plan(events, {}, set())).steps:
        out = around(view, step, DECIDED, StepMode(db, deferring=deferring, fenced=already, pin=pin))
        if step.fenced and not deferring:
            assert [type(e) for e in out] == [Refuse]
            continue
        advances = [e for e in out if isinstance(e, Advance)]
        assert len(advances) == 1 and out[-1] is advances[0]
        marker = advances[0]
        assert marker.last == min(step.last_event_id, pin if pin is not None else step.last_event_id)
        fenced = already or step.fenced or found_fenced
        assert marker.journaled == (not fenced)
        assert marker.progressed == (not (deferring and fenced))
        assert marker.deferred == deferring
        at = out.index(DECIDED[0])
        before = out[:at]
        assert [type(e) for e in before] == (
            ([FenceDatabase] if step.fenced or found_fenced else []) + ([SyncJournal] if deferring else [])
        )
        assert all(isinstance(e, ForgetTable | ForgetTables | ForgetDatabase) for e in out[at + 1 : -1])
