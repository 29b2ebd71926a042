"""Envelope vs payload (``check_envelope``): for every event type, a consistent event passes and one
whose envelope names another database or table than its payload is refused, by the codec and by the
applier.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.errors import EnvelopeMismatchError
from streamer.events.avro import field_hints, split_optional
from streamer.events.codec import check_envelope, decode_event, encode_event
from streamer.events.model import (
    PAYLOAD_TYPE_OF,
    AcidWrite,
    AddConstraintsPayload,
    AlterTablePayload,
    CommitTxnPayload,
    Constraint,
    Event,
    EventType,
    TableSnapshot,
)
from tests import strategies
from tests.unit.target import builders as b

OTHER = "zz_other"  # never drawn: strategies' names are at most 4 characters
UNKEYED = {EventType.OPEN_TXN, EventType.COMMIT_TXN, EventType.ABORT_TXN, EventType.PROGRESS,
           EventType.BOOTSTRAP_END, EventType.UNKNOWN, EventType.COMMIT_COMPACTION}
# payloads that name no database or table at all: nothing in them can disagree with an envelope
NAMELESS = {EventType.DROP_FUNCTION, EventType.OPEN_TXN, EventType.ABORT_TXN, EventType.COMMIT_COMPACTION,
            EventType.PROGRESS, EventType.BOOTSTRAP_END, EventType.UNKNOWN}


def _names(value: Any, field: str) -> list[str]:
    """Every non-None value of the payload's fields that name a database (``field="db"``) or table."""
    found: list[str] = []
    if isinstance(value, list):
        for item in value:
            found += _names(item, field)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            inner = getattr(value, f.name)
            if strategies._NAME_FIELDS.get((type(value), f.name)) == field:
                if inner is not None:
                    found.append(inner)
            else:
                found += _names(inner, field)
    return found


def test_nameless_payloads_are_exactly_those_without_name_fields() -> None:
    for event_type, payload_type in PAYLOAD_TYPE_OF.items():
        names = {f for (cls, f) in strategies._NAME_FIELDS if _reachable(payload_type, cls)}
        assert (event_type in NAMELESS) == (not names), event_type


def _reachable(root: type, cls: type) -> bool:
    """Whether a ``cls`` can be found at any depth in a ``root``."""
    seen: set[type] = set()
    todo = [root]
    while todo:
        current = todo.pop()
        if current is cls:
            return True
        if current not in seen:
            seen.add(current)
            hints = [split_optional(hint)[0] for _, hint in field_hints(current)]
            todo += [c for hint in hints for c in strategies._dataclasses_in(hint)]
    return False


@pytest.mark.parametrize("event_type", list(EventType), ids=str)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_type_consistent_passes_mismatched_is_refused(
    event_type: EventType, data: st.DataObject
) -> None:
    event = data.draw(strategies.events([event_type]))
    check_envelope(event)  # consistent: passes
    dbs, tables = _names(event.payload, "db"), _names(event.payload, "table")
    if event_type is EventType.ALTER_TABLE:  # a rename's old names are not the envelope's
        assert isinstance(event.payload, AlterTablePayload)
        dbs, tables = _names(event.payload.after, "db"), _names(event.payload.after, "table")
    if event_type is EventType.COMMIT_TXN:
        tables = []  # a transaction's envelope names no table
    for changed, named in ((dataclasses.replace(event, db=OTHER), bool(dbs)),
                           (dataclasses.replace(event, table=OTHER), bool(tables))):
        if named:
            with pytest.raises(EnvelopeMismatchError) as raised:
                check_envelope(changed)
            assert raised.value.event_id == event.event_id and OTHER in str(raised.value)
        else:
            check_envelope(changed)  # nothing in the payload names what was changed
    if dbs and event_type not in UNKEYED:  # an envelope naming no database at all
        with pytest.raises(EnvelopeMismatchError):
            check_envelope(dataclasses.replace(event, db=None))
    if event_type in NAMELESS:
        assert not dbs and not tables


def test_the_codec_checks_and_the_target_job_decodes_without() -> None:
    event = b.create_table(3, b.table("a", "t"))
    crafted = dataclasses.replace(event, db="b")
    assert decode_event(encode_event(event)) == event
    with pytest.raises(EnvelopeMismatchError, match="'b'"):
        decode_event(encode_event(crafted))


def test_names_compare_case_insensitively() -> None:
    event = b.create_table(3, b.table("Sales", "Orders"))
    check_envelope(dataclasses.replace(event, db="SALES", table="orders"))


def test_a_rename_names_the_new_table_in_its_envelope() -> None:
    before, after = b.table("a", "old"), b.table("b", "new")
    check_envelope(b.alter_table(4, before, after))
    with pytest.raises(EnvelopeMismatchError):
        check_envelope(dataclasses.replace(b.alter_table(4, before, after), db="a", table="old"))


def test_a_foreign_key_may_be_keyed_by_either_side() -> None:
    fk = Constraint("FOREIGN_KEY", "fk", "child_db", "child", "id", ref_db="parent_db", ref_table="parent",
                    ref_column="id")
    payload = AddConstraintsPayload([fk])
    check_envelope(b.event(5, EventType.ADD_FOREIGNKEY, payload, "parent_db", "parent"))  # as Hive keys it
    check_envelope(b.event(5, EventType.ADD_FOREIGNKEY, payload, "child_db", "child"))
    with pytest.raises(EnvelopeMismatchError):
        check_envelope(b.event(5, EventType.ADD_FOREIGNKEY, payload, "other", "parent"))
    two_tables = AddConstraintsPayload([fk, dataclasses.replace(fk, table="elsewhere")])
    with pytest.raises(EnvelopeMismatchError, match="constraints\\[1\\]"):
        check_envelope(b.event(5, EventType.ADD_FOREIGNKEY, two_tables, "parent_db", "parent"))


def test_a_write_must_name_the_table_its_snapshot_is() -> None:
    write = AcidWrite("a", "t", 1, table_snapshot=TableSnapshot("t", "a"))
    check_envelope(b.event(6, EventType.COMMIT_TXN, CommitTxnPayload(9, [write])))
    lying = dataclasses.replace(write, table_snapshot=TableSnapshot("victim", "foreign"))
    with pytest.raises(EnvelopeMismatchError, match=r"foreign\.victim"):
        check_envelope(b.event(6, EventType.COMMIT_TXN, CommitTxnPayload(9, [lying])))
    # an unkeyed transaction may write anywhere; keyed by a database, only there
    check_envelope(b.event(6, EventType.COMMIT_TXN, CommitTxnPayload(9, [write]), db="a"))
    with pytest.raises(EnvelopeMismatchError):
        check_envelope(b.event(6, EventType.COMMIT_TXN, CommitTxnPayload(9, [write]), db="b"))


def test_the_applier_halts_the_envelopes_database(tmp_path: Any) -> None:
    from streamer.metastore.memory import MemoryCatalog
    from streamer.target.apply.applier import Applier
    from streamer.target.apply.files import FileCopier
    from streamer.target.apply.paths import TargetPaths
    from streamer.target.apply.plan import plan
    from streamer.target.apply.runner import run_plan
    from streamer.target.state.state_file import TargetState

    catalog = MemoryCatalog()
    state = TargetState(tmp_path / "state")
    applier = Applier(catalog, FileCopier(), TargetPaths(str(tmp_path / "wh")), b.SOURCE_ID, state=state)
    victim = b.table("foreign", "t")
    crafted: Event = dataclasses.replace(b.create_table(2, victim), db="a", table="t")
    report = run_plan(applier, plan([b.create_db(1, "a"), crafted], {}), state)
    assert report.applied == [1] and "a" in report.halted
    assert "envelope" in report.halted["a"].cause and catalog.get_database("foreign") is None
