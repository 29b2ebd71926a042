"""An INSERT the source agent could not locate (``InsertPayload.unlocated``: logged without files,
no table to list) is never applied as an empty append: a table replicated by state is synced from the
source's listing, any other halts its database at the event with what to do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from streamer.events.model import Event, InsertPayload
from streamer.target.apply.sources import SourceRules
from tests.unit.target import builders as b
from tests.unit.target.apply.test_apply import Env, make_env
from tests.unit.target.apply.test_by_state import _datasource


def _unlocated(event_id: int, db: str, table: str, values: list[str] | None = None) -> Event:
    """As Hive 2.3 logs an INSERT OVERWRITE: no files, no snapshot; marked by the agent."""
    payload = InsertPayload(None, None, values or [], False, [], unlocated=True)
    return dataclasses.replace(b.insert(event_id, b.table(db, table), []), payload=payload)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path, sources=SourceRules(prefixes=(f"file://{tmp_path / 'src'}",)))


def test_an_unlocated_insert_halts_its_database_and_keeps_the_replica(env: Env) -> None:
    t = env.table("t")
    old = env.file(t, "old-0", b"old rows")
    assert env.run([b.create_db(1, "a"), b.create_table(2, t), b.insert(3, t, [old])]) == [1, 2, 3]
    assert env.run([_unlocated(4, "a", "t")]) == []
    halt = env.state.halts()["a"]
    assert halt.event_id == 4 and halt.object == "a.t", halt
    assert "could not locate" in halt.cause and "streamer target skip" in halt.cause, halt
    assert env.files() == {"a.db/t/old-0": b"old rows"}  # halted before anything changed


def test_an_unlocated_insert_into_a_partition_names_it(env: Env) -> None:
    t = env.table("p", keys=("dt",))
    assert env.run([b.create_db(1, "a"), b.create_table(2, t)]) == [1, 2]
    assert env.run([_unlocated(3, "a", "p", ["1"])]) == []
    halt = env.state.halts()["a"]
    assert halt.event_id == 3 and halt.object == "a.p partition ['1']", halt


def test_an_unlocated_insert_into_a_table_replicated_by_state_syncs_it_from_the_source(env: Env) -> None:
    t = _datasource(env, "ds")
    assert env.run([b.create_db(1, "ds"), b.create_table(2, t)]) == [1, 2]
    (env.src / "ds.db/t/part-1.parquet").write_bytes(b"overwritten")
    assert env.run([_unlocated(3, "ds", "t")]) == [3]
    assert env.files() == {"ds.db/t/part-1.parquet": b"overwritten"} and not env.state.halts()
