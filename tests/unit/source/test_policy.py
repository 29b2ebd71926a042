import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.events.model import (
    AbortTxnPayload,
    AcidWrite,
    AlterTablePayload,
    CommitTxnPayload,
    CreateTablePayload,
    DatabasePayload,
    DropFunctionPayload,
    Event,
    EventType,
    OpenTxnPayload,
    ProgressPayload,
    Source,
    TableSnapshot,
)
from streamer.source.errors import PolicyParseError
from streamer.source.policy import Policy, PolicySet

names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


def _event(kind: EventType, payload: object, db: str | None = None, table: str | None = None) -> Event:
    return Event(Source("s", 1, 0), kind, payload, db=db, table=table)  # type: ignore[arg-type]


def _create(db: str, table: str) -> Event:
    return _event(EventType.CREATE_TABLE, CreateTablePayload(TableSnapshot(table, db)), db, table)


def _rename(db: str, old: str, new: str) -> Event:
    payload = AlterTablePayload(TableSnapshot(old, db), TableSnapshot(new, db))
    return _event(EventType.ALTER_TABLE, payload, db, new)


@pytest.mark.parametrize(
    ("text", "db", "table", "expected"),
    [
        ("sales", "sales", "anything", True),
        ("sales", "SALES", "Orders", True),
        ("sales", "hr", "orders", False),
        ("sales", "salesx", "orders", False),
        ("sales.['orders', 'c[0-9]+']", "sales", "ORDERS", True),
        ("sales.['orders', 'c[0-9]+']", "sales", "c12", True),
        ("sales.['orders', 'c[0-9]+']", "sales", "c12x", False),
        ("sales.['orders', 'c[0-9]+']", "sales", "orders_old", False),
        ("sales.['.*'].['tmp_.*']", "sales", "tmp_1", False),
        ("sales.['.*'].['tmp_.*']", "sales", "orders", True),
        ("sales.[]", "sales", "orders", False),
        ("*", "any", "t", True),
        ("`*`", "any", "t", True),
        ("db*", "dbbb", "t", True),
        ("db*", "db1", "t", False),
        ("`db.*`", "db1", "t", True),
        ('sales.["o\\"q"]', "sales", 'o"q', True),
        (" sales . [ 'a' , 'b' ] ", "sales", "b", True),
    ],
)
def test_includes_table(text: str, db: str, table: str, expected: bool) -> None:
    assert Policy.parse(text).includes_table(db, table) is expected


@pytest.mark.parametrize(
    ("text", "position", "expected"),
    [
        ("", 0, "database name or '*'"),
        ("sales.", 6, "'['"),
        ("sales.[", 7, "quoted regex or ']'"),
        ("sales.['a'", 10, "',' or ']'"),
        ("sales.['a',]", 11, "quoted regex"),
        ("sales.['a'] x", 12, "'.' or end of policy"),
        ("sales.['a'].['b'].['c']", 17, "end of policy"),
        ("sales.['(']", 8, "a valid regular expression"),
        ("sales.['abc", 11, "closing '"),
        ("`sales", 6, "closing '`'"),
        ("sales.['']", 7, "non-empty regex"),
    ],
)
def test_parse_errors_name_position_and_expected_token(text: str, position: int, expected: str) -> None:
    with pytest.raises(PolicyParseError) as info:
        Policy.parse(text)
    assert info.value.position == position
    assert info.value.expected.startswith(expected)
    assert f"position {position}" in str(info.value)


def test_functions_only_policy_passes_db_level_events_not_tables() -> None:
    policy = Policy.parse("sales.[]")
    assert policy.accepts(_event(EventType.DROP_FUNCTION, DropFunctionPayload("f"), "sales"))
    assert policy.accepts(_event(EventType.CREATE_DATABASE, DatabasePayload(), "sales"))
    assert not policy.accepts(_create("sales", "t"))
    assert not policy.accepts(_event(EventType.DROP_FUNCTION, DropFunctionPayload("f"), "hr"))


def test_rename_in_or_out_of_scope_is_published() -> None:
    policy = Policy.parse("sales.['keep_.*']")
    assert policy.accepts(_rename("sales", "keep_a", "gone_a"))  # targets must drop it
    assert policy.accepts(_rename("sales", "other", "keep_b"))  # targets must create it
    assert not policy.accepts(_rename("sales", "x", "y"))


def test_transaction_and_progress_events() -> None:
    policy = Policy.parse("sales")
    assert policy.accepts(_event(EventType.OPEN_TXN, OpenTxnPayload([1])))
    assert policy.accepts(_event(EventType.COMMIT_TXN, CommitTxnPayload(1), "sales"))
    assert not policy.accepts(_event(EventType.COMMIT_TXN, CommitTxnPayload(1), "hr"))
    assert policy.accepts(_event(EventType.ABORT_TXN, AbortTxnPayload(1, ["hr", "sales"])))
    assert not policy.accepts(_event(EventType.ABORT_TXN, AbortTxnPayload(1, ["hr"])))
    assert Policy.parse("nothing").accepts(_event(EventType.PROGRESS, ProgressPayload(1, 2)))


def test_select_trims_commit_writes_to_scope() -> None:
    writes = [AcidWrite("sales", "a", 1), AcidWrite("sales", "tmp_b", 1), AcidWrite("hr", "c", 1)]
    event = _event(EventType.COMMIT_TXN, CommitTxnPayload(7, writes))
    selected = Policy.parse("sales.['.*'].['tmp_.*']").select(event)
    assert selected is not None
    assert isinstance(selected.payload, CommitTxnPayload)
    assert [w.table for w in selected.payload.writes] == ["a"]


def test_policy_set_is_a_union_and_defaults_to_everything() -> None:
    policies = PolicySet.parse(["sales.['a']", "hr"])
    assert policies.includes_table("sales", "a") and policies.includes_table("hr", "z")
    assert not policies.includes_table("sales", "b")
    assert PolicySet.parse([]).includes_table("x", "y")


@settings(deadline=None)
@given(db=names, table=names, include=st.lists(names, max_size=3), exclude=st.lists(names, max_size=3))
def test_literal_lists_match_set_membership(
    db: str, table: str, include: list[str], exclude: list[str]
) -> None:
    text = f"{db}.[{', '.join(repr(n) for n in include)}].[{', '.join(repr(n) for n in exclude)}]"
    if not exclude:
        text = f"{db}.[{', '.join(repr(n) for n in include)}]"
    policy = Policy.parse(text)
    expected = table in include and table not in exclude
    assert policy.includes_table(db, table) is expected
    assert policy.includes_table(db.upper(), table.upper()) is expected
    assert policy.includes_table(db + "x", table) is False


@settings(deadline=None)
@given(db=names, table=names, other=names)
def test_accepts_table_event_iff_table_in_scope(db: str, table: str, other: str) -> None:
    policy = Policy.parse(f"{db}.['{re.escape(table)}']")
    assert policy.accepts(_create(db, table))
    assert policy.accepts(_create(db, other)) is (other == table)
    # a rename is accepted exactly when one side is in scope
    assert policy.accepts(_rename(db, table, other))
    assert policy.accepts(_rename(db, other, other + "2")) is (table in (other, other + "2"))


@settings(deadline=None)
@given(text=st.text(max_size=30))
def test_parser_never_fails_with_anything_but_policy_error(text: str) -> None:
    try:
        policy = Policy.parse(text)
    except PolicyParseError as exc:
        assert 0 <= exc.position <= len(text)
    else:
        assert policy.includes_db("x") in (True, False)
