"""Security review, round 2: a record never changes a database this source does not own (bootstrap
records too), and a DROP_PARTITION never resolves to its table's own directory.

Each attack worked before its rule (docs/security.md, "What a record is trusted for"): a bootstrap
TABLE, PARTITIONS, FUNCTION or DROP_TABLE record naming a foreign database was applied there (only
DATABASE records checked ownership), and a DROP_PARTITION of an empty spec deleted an unpartitioned
managed table's data while the catalog still listed the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.errors import ApplyError
from streamer.events.model import (
    AlterPartitionPayload,
    BootstrapKind,
    BootstrapMarkerPayload,
    BootstrapObjectPayload,
    BootstrapScope,
    DatabaseSnapshot,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    PartitionSnapshot,
    TableSnapshot,
)
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.target.apply.plan import StepKind, plan
from streamer.target.state.state_file import Halt
from tests.unit.target import builders as b
from tests.unit.target.apply.test_apply import Env, make_env

pytestmark = pytest.mark.timeout(120)

BID = 50  # the bootstrap's id: every record's envelope event id
THEIRS = b"another source's data"
OTHER_SOURCE = "src2"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def _tree(path: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) below ``path``."""
    return {str(p.relative_to(path)): p.read_bytes() if p.is_file() else None for p in path.rglob("*")}


def _not_owned(env: Env, owner: str | None) -> None:
    """Target database ``b``, replicated from ``owner`` (None: made by no streamer source), with a
    table ``t`` holding a file, a function ``f``, and a directory ``gone`` the catalog does not list."""
    marks = {REPL_SOURCE_PARAM: owner, LAST_ID_PARAM: "5"} if owner else {}
    env.catalog.create_database(DatabaseSnapshot("b", location=str(env.wh / "b.db"), parameters=marks))
    table = b.table("b", "t", ("p",), location=str(env.wh / "b.db" / "t"), **marks)
    env.catalog.create_table(table)
    part = b.partition(table, "1")
    env.catalog.add_partitions("b", "t", [part])
    env.catalog.create_function(FunctionSnapshot("f", "b", "their.Udf"))
    for rel in ("t/p=1/000000_0", "gone/000000_0"):
        (env.wh / "b.db" / rel).parent.mkdir(parents=True, exist_ok=True)
        (env.wh / "b.db" / rel).write_bytes(THEIRS)


def _record(seq: int, kind: BootstrapKind, db: str = "b", **fields: object) -> Event:
    """Bootstrap record ``seq`` of ``BID`` carrying ``fields``, its envelope naming what they name."""
    payload = BootstrapObjectPayload(BID, seq, 9, kind, BootstrapScope.FULL, **fields)  # type: ignore[arg-type]
    table = payload.table.name if payload.table else None
    return b.event(BID, EventType.BOOTSTRAP, payload, db=db, table=table)


def _source_table(env: Env, db: str, name: str, keys: tuple[str, ...] = ()) -> TableSnapshot:
    return b.table(db, name, keys, location=f"file://{env.src}/{db}.db/{name}")


def _file(env: Env, snap: TableSnapshot, rel: str, partition: str | None = None) -> FileRef:
    ref: FileRef = b.replace(env.file(snap, rel, b"the record's data"), partition=partition)
    return ref


def _records(env: Env, kind: BootstrapKind) -> list[Event]:
    """An attack on database ``b`` by one kind of record (PARTITIONS after the TABLE it belongs to)."""
    if kind is BootstrapKind.DATABASE:
        return [_record(1, kind, database=DatabaseSnapshot("b", location=f"file://{env.src}/b.db"))]
    if kind is BootstrapKind.FUNCTION:
        return [_record(1, kind, function=FunctionSnapshot("f", "b", "evil.Udf"))]
    if kind is BootstrapKind.DROP_TABLE:
        return [_record(1, kind, table=_source_table(env, "b", "gone"))]
    if kind is BootstrapKind.PARTITIONS:
        t2 = _source_table(env, "b", "t2", ("p",))
        parts: list[PartitionSnapshot] = [b.partition(t2, "2")]
        later = [_file(env, t2, "p=2/000000_0", "p=2")]
        return [_record(1, BootstrapKind.TABLE, table=t2),
                _record(2, kind, table=t2, partitions=parts, files=later)]
    t2 = _source_table(env, "b", "t2")
    return [_record(1, kind, table=t2, files=[_file(env, t2, "000000_0")])]


def _halt(env: Env, db: str) -> Halt:
    halts = env.state.halts()
    assert db in halts, f"database {db} was not halted"
    return halts[db]


# --- bootstrap records and database ownership ---------------------------------------------------------


@pytest.mark.parametrize("owner", [OTHER_SOURCE, None], ids=["another-source", "no-source"])
@pytest.mark.parametrize("kind", [BootstrapKind.TABLE, BootstrapKind.PARTITIONS, BootstrapKind.FUNCTION,
                                  BootstrapKind.DROP_TABLE])
def test_a_bootstrap_record_never_changes_a_database_this_source_does_not_own(
    env: Env, kind: BootstrapKind, owner: str | None
) -> None:
    """Before: only DATABASE records checked ownership, so these created tables and wrote files in
    another source's database, replaced its function's class, or deleted its directories."""
    _not_owned(env, owner)
    catalog, files = env.catalog.dump(), _tree(env.wh)
    env.run(_records(env, kind))
    assert env.catalog.dump() == catalog, "the foreign database changed in the catalog"
    assert _tree(env.wh) == files, "a file of the target changed"
    assert _halt(env, "b").event_id == BID


@pytest.mark.parametrize("kind", list(BootstrapKind))
def test_every_bootstrap_kind_is_refused_by_the_check_incremental_events_pass(
    env: Env, kind: BootstrapKind
) -> None:
    """One ownership check (``ApplyContext.check_owned``) for every record: its refusal, not another
    rule's, halts the database, whatever kind of record asked."""
    _not_owned(env, OTHER_SOURCE)
    with pytest.raises(ApplyError) as incremental:
        env.applier.check_owned("b")
    env.run(_records(env, kind))
    assert incremental.value.cause in _halt(env, "b").cause


def test_the_refusal_names_the_event_the_record_and_the_cause(env: Env) -> None:
    """Every record of a bootstrap has the bootstrap's event id: the halt must also say which record
    (its sequence, kind and object) and why (whose database it is)."""
    _not_owned(env, OTHER_SOURCE)
    env.run(_records(env, BootstrapKind.TABLE))
    halt = _halt(env, "b")
    assert (halt.event_id, halt.event_type) == (BID, "STREAMER_BOOTSTRAP")
    assert halt.object is not None and "b.t2" in halt.object
    assert "record 1" in halt.cause and "TABLE b.t2" in halt.cause
    assert OTHER_SOURCE in halt.cause and "refusing" in halt.cause


def test_a_bootstrap_record_of_an_owned_database_still_applies(env: Env) -> None:
    """The check refuses only what is not ours: a TABLES bootstrap (a policy change adding a table)
    into a database this source replicates, at its ``repl.last.id``, applies."""
    env.run([b.create_db(1, "b")])
    t2 = _source_table(env, "b", "t2")
    payload = BootstrapObjectPayload(BID, 1, 1, BootstrapKind.TABLE, BootstrapScope.TABLES, table=t2,
                                     files=[_file(env, t2, "000000_0")])
    assert env.run([b.event(BID, EventType.BOOTSTRAP, payload, db="b", table="t2")]) == [BID]
    assert env.catalog.get_table("b", "t2") is not None
    assert env.files() == {"b.db/t2/000000_0": b"the record's data"}


def test_the_closing_marker_never_moves_a_foreign_databases_progress(env: Env) -> None:
    """The marker goes through the same check: a database it lists that is not ours keeps its
    ``repl.last.id`` (and the marker does not halt: it names many databases)."""
    _not_owned(env, OTHER_SOURCE)
    marker = BootstrapMarkerPayload(BID, 0, BootstrapScope.FULL, ["b"])
    env.run([b.event(BID, EventType.BOOTSTRAP_END, marker)])
    db = env.catalog.get_database("b")
    assert db is not None and db.parameters[LAST_ID_PARAM] == "5"
    assert not env.state.halts()


# --- DROP_PARTITION specs -----------------------------------------------------------------------------


def _unpartitioned(env: Env) -> TableSnapshot:
    """Managed table ``a.t`` without partition keys, holding one file."""
    t = env.table("t")
    assert env.run([b.create_db(1, "a"), b.create_table(2, t, [env.file(t, "000000_0", b"rows")])]) == [1, 2]
    return t


def test_an_empty_spec_never_deletes_an_unpartitioned_tables_data(env: Env) -> None:
    """Before: ``[]`` on a table without keys named partition ``""``, whose directory is the table's:
    the table's data was deleted while the catalog still listed it."""
    t = _unpartitioned(env)
    env.run([b.drop_partition(3, t, [[]])])
    assert env.files() == {"a.db/t/000000_0": b"rows"}
    assert env.catalog.get_table("a", "t") is not None
    assert _halt(env, "a").event_id == 3


def test_merged_empty_specs_never_delete_an_unpartitioned_tables_data(env: Env) -> None:
    """The merged path (consecutive drops of one table, one call) refuses them too, at the first."""
    t = _unpartitioned(env)
    drops = [b.drop_partition(3, t, [[]]), b.drop_partition(4, t, [[]])]
    assert [s.kind for s in plan(drops, {"a": 2}).steps] == [StepKind.DROP_PARTITIONS]
    env.run(drops)
    assert env.files() == {"a.db/t/000000_0": b"rows"}
    assert _halt(env, "a").event_id == 3


def test_a_drop_naming_no_partition_drops_nothing_and_applies(env: Env) -> None:
    """No spec at all (not one empty spec): nothing to drop, as before; the table's data stays."""
    t = _unpartitioned(env)
    assert env.run([b.drop_partition(3, t, [])]) == [3]
    assert env.state.halts() == {} and env.files() == {"a.db/t/000000_0": b"rows"}


@pytest.mark.parametrize("specs", [[[]], [["1"]]], ids=["empty-spec", "one-value"])
def test_any_partition_drop_on_a_table_without_partition_keys_halts(env: Env, specs: list[list[str]]) -> None:
    """A table without partition keys has no partition to drop: whatever the event names, it is not
    the source's state, so the database halts and says why."""
    t = _unpartitioned(env)
    env.run([b.drop_partition(3, t, specs)])
    halt = _halt(env, "a")
    assert halt.event_id == 3 and "no partition keys" in halt.cause
    assert env.files() == {"a.db/t/000000_0": b"rows"}


def test_no_partition_event_resolves_to_an_unpartitioned_tables_directory(env: Env) -> None:
    """The rule holds where partition directories are derived, for every handler: before, an
    ADD_PARTITION of ``[]`` listed a partition located at the table's own directory, and a truncate of
    it then cleared the table's data."""
    t = _unpartitioned(env)
    part = PartitionSnapshot(values=[], db="a", table="t")
    truncate = AlterPartitionPayload(t, part, part, is_truncate=True)
    env.run([b.add_partition(3, t, [part]), b.event(4, EventType.ALTER_PARTITION, truncate, "a", "t")])
    assert env.files() == {"a.db/t/000000_0": b"rows"}
    assert env.catalog.list_partitions("a", "t") == []
    assert _halt(env, "a").event_id == 3


@pytest.mark.parametrize("spec", [[], ["1"], ["1", "1", "1"]], ids=["empty", "short", "long"])
def test_a_spec_of_another_length_than_the_keys_halts_and_drops_nothing(env: Env, spec: list[str]) -> None:
    """A spec gives one value per partition key, in order; any other length names no partition."""
    t = env.table("t", ("p", "q"))
    part = b.partition(t, "1", "1")
    ref = b.replace(env.file(t, "p=1/q=1/000000_0", b"rows"), partition="p=1/q=1")
    env.run([b.create_db(1, "a"), b.create_table(2, t), b.add_partition(3, t, [part], [ref])])
    env.run([b.drop_partition(4, t, [spec])])
    halt = _halt(env, "a")
    assert halt.event_id == 4 and "partition keys" in halt.cause
    assert [p.values for p in env.catalog.list_partitions("a", "t")] == [["1", "1"]]
    assert env.files() == {"a.db/t/p=1/q=1/000000_0": b"rows"}


def test_a_merged_step_applies_the_drops_before_a_bad_spec_and_halts_at_it(env: Env) -> None:
    """In one call for consecutive drops, an event with a bad spec fails as itself: the drops before
    it are applied, it and the ones after are not."""
    t = env.table("t", ("p",))
    parts = [b.partition(t, v) for v in ("1", "2")]
    refs = [b.replace(env.file(t, f"p={v}/000000_0", v.encode()), partition=f"p={v}") for v in ("1", "2")]
    env.run([b.create_db(1, "a"), b.create_table(2, t), b.add_partition(3, t, parts, refs)])
    drops = [b.drop_partition(4, t, [["1"]]), b.drop_partition(5, t, [[]]), b.drop_partition(6, t, [["2"]])]
    assert [s.kind for s in plan(drops, {"a": 3}).steps] == [StepKind.DROP_PARTITIONS]
    env.run(drops)
    assert _halt(env, "a").event_id == 5
    assert [p.values for p in env.catalog.list_partitions("a", "t")] == [["2"]]
    assert env.files() == {"a.db/t/p=2/000000_0": b"2"}
