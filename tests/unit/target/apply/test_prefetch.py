"""A backlog's batch reads the tables its events name in one call per database (``runner.prefetch``)."""

from __future__ import annotations

from pathlib import Path

from streamer.events.model import TableSnapshot
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.target.apply.markers import DEFER_MIN_EVENTS
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from tests.unit.target import builders as b

from .test_apply import Env, make_env


def _counting(env: object) -> list[str]:
    """Record every ``get_table`` of the env's catalog (the memory catalog records only writes)."""
    catalog = env.catalog  # type: ignore[attr-defined]
    seen: list[str] = []
    real = catalog.get_table

    def get_table(db: str, table: str) -> object:
        seen.append(f"{db}.{table}")
        return real(db, table)

    def get_tables(db: str, names: list[str]) -> list[object]:
        catalog.calls.append("get_tables")
        return [t for n in names if (t := real(db, n)) is not None]

    catalog.get_table = get_table
    catalog.get_tables = get_tables
    return seen


def _with_table(tmp_path: Path) -> tuple[Env, TableSnapshot]:
    """Database a with table t, applied."""
    env = make_env(tmp_path)
    t = env.table("t")
    env.run([b.create_db(1, "a"), b.create_table(2, t)])
    return env, t


def test_a_backlog_reads_its_tables_in_one_call_and_knows_the_absent_ones(tmp_path: Path) -> None:
    env, t = _with_table(tmp_path)
    reads = _counting(env)
    calls = len(env.catalog.calls)
    new = [b.create_table(3 + i, env.table(f"n{i}")) for i in range(DEFER_MIN_EVENTS)]  # absent: created
    alters = [b.alter_table(20 + i, t, b.replace(t, parameters={"v": str(i)})) for i in range(2)]
    applied = env.run([*new, *alters])
    assert applied == [e.event_id for e in [*new, *alters]]
    assert env.catalog.calls[calls:].count("get_tables") == 1
    assert reads == []  # neither the new names nor t were read one by one


def test_a_small_batch_reads_as_it_goes(tmp_path: Path) -> None:
    env, t = _with_table(tmp_path)
    reads = _counting(env)
    calls = len(env.catalog.calls)
    env.run([b.alter_table(3, t, b.replace(t, parameters={"v": "1"}))])
    assert "get_tables" not in env.catalog.calls[calls:]
    assert reads == ["a.t"]


def test_a_small_batch_naming_two_tables_reads_them_in_one_call(tmp_path: Path) -> None:
    """Live traffic: a batch under ``DEFER_MIN_EVENTS`` events whose events name two tables of one
    database reads both in one call, the absent one included."""
    env, t = _with_table(tmp_path)
    reads = _counting(env)
    calls = len(env.catalog.calls)
    events = [b.alter_table(3, t, b.replace(t, parameters={"v": "1"})), b.create_table(4, env.table("n"))]
    assert len(events) < DEFER_MIN_EVENTS
    assert env.run(events) == [3, 4]
    assert env.catalog.calls[calls:].count("get_tables") == 1
    assert reads == []
    assert env.catalog.tables[("a", "t")].parameters["v"] == "1" and ("a", "n") in env.catalog.tables


def test_a_foreign_table_found_by_the_prefetch_is_still_refused_by_its_step(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.run([b.create_db(1, "a")])
    foreign = env.table("f")
    env.catalog.tables[("a", "f")] = b.replace(foreign, parameters={REPL_SOURCE_PARAM: "someone-else"})
    events = [b.create_table(2 + i, env.table(f"n{i}")) for i in range(DEFER_MIN_EVENTS)]
    events.append(b.alter_table(20, foreign, b.replace(foreign, parameters={"v": "1"})))
    report = run_plan(env.applier, plan(events, env.applier.load_progress()), env.state)
    halt = report.halted["a"]
    assert halt.event_id == 20 and "not created by replication" in halt.cause
    assert env.catalog.tables[("a", "f")].parameters == {REPL_SOURCE_PARAM: "someone-else"}
