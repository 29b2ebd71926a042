"""The applier on the in-memory catalog and real temp dirs."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.errors import ApplyError, ChecksumMismatchError
from streamer.events.model import (
    AlterPartitionPayload,
    DatabaseSnapshot,
    Event,
    EventType,
    FileRef,
    TableSnapshot,
)
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import DEFER_MIN_EVENTS, Applier
from streamer.target.apply.files import TMP_PREFIX, FileCopier
from streamer.target.apply.journal import JOURNAL_FILE
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b


@dataclasses.dataclass
class Env:
    root: Path
    catalog: MemoryCatalog
    applier: Applier
    state: TargetState

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def wh(self) -> Path:
        return self.root / "wh"

    def table(self, name: str, keys: tuple[str, ...] = (), db: str = "a", **kw: str) -> TableSnapshot:
        return b.table(db, name, keys, location=f"file://{self.src}/{db}.db/{name}", **kw)

    def file(self, snap: TableSnapshot, rel: str, content: bytes) -> FileRef:
        base = Path(snap.sd.location.removeprefix("file://"))  # type: ignore[union-attr]
        return b.write_source_file(base, rel, content)

    def run(self, events: list[Event]) -> list[int]:
        result = run_plan(
            self.applier, plan(events, self.applier.load_progress(), self.state.halts()), self.state
        )
        return result.applied

    def files(self) -> dict[str, bytes]:
        """What readers see: every file without a hidden (``.``/``_``) component in its path."""
        out = {}
        for p in self.wh.rglob("*"):
            rel = p.relative_to(self.wh)
            if p.is_file() and not any(part.startswith((".", "_")) for part in rel.parts):
                out[str(rel)] = p.read_bytes()
        return out


def make_env(root: Path, **kw: object) -> Env:
    catalog = MemoryCatalog()
    state = TargetState(root / "state")
    (root / "wh").mkdir(parents=True, exist_ok=True)
    paths = TargetPaths(str(root / "wh"), str(root / "ext"))
    applier = Applier(catalog, FileCopier(max_workers=2), paths, b.SOURCE_ID, state=state, **kw)  # type: ignore[arg-type]
    return Env(root, catalog, applier, state)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def test_database_and_table_lifecycle_with_files(env: Env) -> None:
    t = env.table("t", ("p",))
    f1 = env.file(t, "p=1/000000_0", b"one")
    f2 = env.file(t, "p=2/000000_0", b"two")
    events = [
        b.create_db(1, "a", owner="x"),
        b.create_table(2, t),
        b.add_partition(3, t, [b.partition(t, "1")], [dataclasses.replace(f1, partition="p=1")]),
        b.add_partition(4, t, [b.partition(t, "2")], [dataclasses.replace(f2, partition="p=2")]),
    ]
    assert env.run(events) == [1, 2, 3, 4]
    db = env.catalog.get_database("a")
    assert (
        db is not None and db.parameters[LAST_ID_PARAM] == "4" and db.parameters[REPL_SOURCE_PARAM] == "src1"
    )
    assert db.location == str(env.wh / "a.db")
    table = env.catalog.get_table("a", "t")
    assert table is not None and table.sd.location == str(env.wh / "a.db" / "t")
    parts = env.catalog.list_partitions("a", "t")
    assert [p.sd.location for p in parts] == [str(env.wh / "a.db/t/p=1"), str(env.wh / "a.db/t/p=2")]
    assert env.files() == {"a.db/t/p=1/000000_0": b"one", "a.db/t/p=2/000000_0": b"two"}
    assert "add_partitions" in env.catalog.calls and env.catalog.calls.count("add_partitions") == 1

    assert env.run([b.drop_partition(5, t, [["1"]]), b.drop_table(6, t)]) == [5, 6]
    assert env.catalog.get_table("a", "t") is None and env.files() == {}
    assert env.run([b.drop_db(7, "a")]) == [7]
    assert env.catalog.get_database("a") is None
    assert env.applier.load_progress()["a"] == 7  # kept in the state file: a replay does not resurrect it
    assert env.run([b.create_db(1, "a"), b.drop_db(7, "a")]) == []


def test_insert_and_overwrite(env: Env) -> None:
    t = env.table("t")
    first = env.file(t, "000000_0", b"v1")
    env.run([b.create_db(1, "a"), b.create_table(2, t, [first])])
    assert env.files() == {"a.db/t/000000_0": b"v1"}
    second = env.file(t, "000001_0", b"v2")
    env.run([b.insert(3, t, [second])])
    assert env.files() == {"a.db/t/000000_0": b"v1", "a.db/t/000001_0": b"v2"}
    (env.src / "a.db/t/000000_0").unlink()
    (env.src / "a.db/t/000001_0").unlink()
    new = env.file(t, "000000_0", b"v3")
    env.run([b.insert(4, t, [new], replace=True)])
    assert env.files() == {"a.db/t/000000_0": b"v3"}
    assert not list(env.wh.rglob(f"{TMP_PREFIX}*"))


def test_failed_insert_makes_nothing_visible_and_halts_only_its_database(env: Env) -> None:
    t = env.table("t")
    env.run([b.create_db(1, "a"), b.create_db(2, "b"), b.create_table(3, t)])
    good = env.file(t, "good", b"good")
    bad = env.file(t, "bad", b"bad")
    (env.src / "a.db/t/bad").write_bytes(b"changed, and no cm copy")
    u = env.table("u", db="b")
    applied = env.run([b.insert(4, t, [good, bad]), b.create_table(5, u), b.insert(6, t, [good])])
    assert applied == [5]
    assert env.files() == {}
    halt = env.state.halts()["a"]
    assert halt.event_id == 4 and "bad" in (halt.object or "")
    assert env.catalog.get_database("a").parameters[LAST_ID_PARAM] == "3"  # type: ignore[union-attr]
    # held, not lost: after a retry the job re-reads 4 and 6; once the source is fixed both apply
    (env.src / "a.db/t/bad").write_bytes(b"bad")
    env.state.retry("a")
    assert env.run([b.insert(4, t, [good, bad]), b.create_table(5, u), b.insert(6, t, [good])]) == [4, 6]
    assert env.files() == {"a.db/t/good": b"good", "a.db/t/bad": b"bad"}


def test_operator_skip_advances_past_exactly_the_event(env: Env) -> None:
    t = env.table("t")
    env.run([b.create_db(1, "a"), b.create_table(2, t)])
    bad = dataclasses.replace(env.file(t, "f", b"x"), checksum="0" * 64)
    later = env.file(t, "g", b"g")
    assert env.run([b.insert(3, t, [bad]), b.insert(4, t, [later])]) == []
    env.state.skip("a", 3)
    assert env.run([b.insert(3, t, [bad]), b.insert(4, t, [later])]) == [4]
    assert env.files() == {"a.db/t/g": b"g"}


def test_a_merged_drop_of_partitions_halts_at_the_event_that_fails_and_skip_passes_only_it(env: Env) -> None:
    """Hive 2.x's drops of one statement are one step: one of them naming values the table's keys do
    not fit fails as itself, after the drops before it are applied, so that skipping it loses none."""
    t = env.table("t", ("p",))
    parts = [b.partition(t, v) for v in "123"]
    env.run([b.create_db(1, "a"), b.create_table(2, t), b.add_partition(3, t, parts)])
    drops = [b.drop_partition(4, t, [["1"]]), b.drop_partition(5, t, [["2", "x"]]),
             b.drop_partition(6, t, [["3"]])]
    assert [len(s.events) for s in plan(drops, env.applier.load_progress()).steps] == [3]
    assert env.run(drops) == []
    halt = env.state.halts()["a"]
    assert (halt.event_id, halt.event_type) == (5, "DROP_PARTITION") and "p" in halt.cause
    assert [p.values for p in env.catalog.list_partitions("a", "t")] == [["2"], ["3"]]  # 4 applied
    env.state.skip("a", 5)
    assert env.run(drops) == [6]
    assert [p.values for p in env.catalog.list_partitions("a", "t")] == [["2"]]


def test_managed_rename_moves_data_and_repoints_partitions(env: Env) -> None:
    t = env.table("t", ("p",))
    f = env.file(t, "p=1/f", b"1")
    env.run([b.create_db(1, "a"), b.create_table(2, t), b.add_partition(3, t, [b.partition(t, "1")], [f])])
    u = dataclasses.replace(t, name="u", sd=dataclasses.replace(t.sd, location=f"file://{env.src}/a.db/u"))
    step = b.alter_table(4, t, u)
    env.run([step])
    assert env.catalog.get_table("a", "t") is None
    assert env.catalog.get_table("a", "u").sd.location == str(env.wh / "a.db/u")  # type: ignore[union-attr]
    assert [p.sd.location for p in env.catalog.list_partitions("a", "u")] == [str(env.wh / "a.db/u/p=1")]
    assert env.files() == {"a.db/u/p=1/f": b"1"}
    before = env.catalog.dump()
    env.applier.apply(plan([step], {}).steps[0])  # replay after a crash before repl.last.id
    assert env.catalog.dump() == before and env.files() == {"a.db/u/p=1/f": b"1"}


def test_truncate_removes_files_after_the_metadata_change(env: Env) -> None:
    t = env.table("t")
    env.run([b.create_db(1, "a"), b.create_table(2, t, [env.file(t, "f", b"1")])])
    env.run([b.alter_table(3, t, dataclasses.replace(t, parameters={"numRows": "0"}), truncate=True)])
    assert env.files() == {}
    assert env.catalog.get_table("a", "t").parameters["numRows"] == "0"  # type: ignore[union-attr]


def test_foreign_database_is_refused_unless_allowed(tmp_path: Path) -> None:
    env = make_env(tmp_path / "1")
    env.catalog.create_database(DatabaseSnapshot(name="a"))
    assert env.run([b.create_db(1, "a")]) == []
    assert "not created by replication" in env.state.halts()["a"].cause
    assert env.catalog.get_database("a") == DatabaseSnapshot(name="a")

    allowed = make_env(tmp_path / "2", allow_existing_db=True)
    allowed.catalog.create_database(DatabaseSnapshot(name="a"))
    assert allowed.run([b.create_db(1, "a")]) == [1]


def test_db_map_renames_the_target_database(tmp_path: Path) -> None:
    env = make_env(tmp_path, db_map={"a": "a_replica"})
    t = env.table("t")
    env.run([b.create_db(1, "a"), b.create_table(2, t, [env.file(t, "f", b"1")])])
    assert env.catalog.list_databases() == ["a_replica"]
    assert env.files() == {"a_replica.db/t/f": b"1"}
    assert env.applier.load_progress() == {"a": 2}


def test_escaping_external_location_halts(env: Env) -> None:
    ext = env.table("e", table_type="EXTERNAL_TABLE")
    ext = dataclasses.replace(
        ext, sd=dataclasses.replace(ext.sd, location="hdfs://nn/data/%2e%2e/%2e%2e/etc")
    )
    env.run([b.create_db(1, "a"), b.create_table(2, ext)])
    halt = env.state.halts()["a"]
    assert halt.event_id == 2 and halt.event_type == "CREATE_TABLE"


def test_external_table_files_land_under_the_base_dir(env: Env) -> None:
    ext = env.table("e", table_type="EXTERNAL_TABLE")
    env.run([b.create_db(1, "a"), b.create_table(2, ext, [env.file(ext, "f", b"1")])])
    target = env.root / "ext" / "file" / "_" / str(env.src).lstrip("/") / "a.db/e/f"  # <base>/<scheme>/<host>
    assert target.read_bytes() == b"1"
    assert env.catalog.get_table("a", "e").sd.location == str(target.parent)  # type: ignore[union-attr]


def test_cm_fallback_through_the_applier(env: Env) -> None:
    t = env.table("t")
    env.run([b.create_db(1, "a"), b.create_table(2, t)])
    ref = env.file(t, "f", b"point in time")
    cm = env.root / "cm" / f"f_{ref.checksum}"  # named as Hive's change manager names it
    cm.parent.mkdir()
    cm.write_bytes(b"point in time")
    (env.src / "a.db/t/f").write_bytes(b"overwritten later")
    env.run([b.insert(3, t, [dataclasses.replace(ref, cm_uri=str(cm))])])
    assert env.files() == {"a.db/t/f": b"point in time"}


def test_error_names_event_and_object(env: Env) -> None:
    t = env.table("t")
    env.run([b.create_db(1, "a")])
    with pytest.raises(ChecksumMismatchError) as info:
        env.applier.apply(
            plan(
                [b.create_table(2, t, [dataclasses.replace(env.file(t, "f", b"1"), checksum="00" * 32)])], {}
            ).steps[0]
        )
    assert info.value.event_id == 2
    with pytest.raises(ApplyError, match="missing on the target") as missing:
        env.applier.apply(plan([b.insert(3, env.table("nope"), [])], {}).steps[0])
    assert missing.value.event_id == 3 and missing.value.obj == "a.nope"


# --- apply once == apply with a replay of any step ---------------------------------------------------


@st.composite
def workloads(draw: st.DrawFn) -> list[tuple[str, str, int]]:
    ops = st.tuples(
        st.sampled_from(["create", "add", "insert", "overwrite", "rename", "truncate", "droppart", "drop"]),
        st.sampled_from(["t", "u"]),
        st.integers(0, 2),
    )
    return draw(st.lists(ops, min_size=1, max_size=12))


def build_events(root: Path, ops: list[tuple[str, str, int]]) -> list[Event]:
    """Turn random ops into a valid event sequence over a tiny model of the source."""
    src = root / "src"
    tables: dict[str, TableSnapshot] = {}
    parts: dict[str, set[str]] = {}
    events: list[Event] = [b.create_db(1, "a")]
    n = 1

    def snap(name: str) -> TableSnapshot:
        return b.table("a", name, ("p",), location=f"file://{src}/a.db/{name}")

    def file(name: str, part: str) -> FileRef:
        ref = b.write_source_file(src / "a.db" / name / f"p={part}", f"f{n}", f"{name}{part}{n}".encode())
        return dataclasses.replace(ref, partition=f"p={part}")

    for op, name, k in ops:
        n += 1
        part = str(k)
        exists = name in tables
        if op == "create" and not exists:
            tables[name], parts[name] = snap(name), set()
            events.append(b.create_table(n, tables[name]))
        elif op == "add" and exists and part not in parts[name]:
            parts[name].add(part)
            events.append(
                b.add_partition(n, tables[name], [b.partition(tables[name], part)], [file(name, part)])
            )
        elif op in ("insert", "overwrite") and exists and part in parts[name]:
            events.append(
                b.insert(n, tables[name], [file(name, part)], values=[part], replace=op == "overwrite")
            )
        elif op == "rename" and exists:
            other = "u" if name == "t" else "t"
            if other not in tables:
                tables[other], parts[other] = snap(other), parts.pop(name)
                events.append(b.alter_table(n, tables.pop(name), tables[other]))
        elif op == "truncate" and exists and parts[name]:
            t = tables[name]
            events.append(b.event(n, EventType.ALTER_PARTITION, _truncate_payload(t, part), "a", name))
            if part not in parts[name]:
                events.pop()
        elif op == "droppart" and exists and part in parts[name]:
            parts[name].discard(part)
            events.append(b.drop_partition(n, tables[name], [[part]]))
        elif op == "drop" and exists:
            events.append(b.drop_table(n, tables.pop(name)))
            parts.pop(name)
    return events


def _truncate_payload(t: TableSnapshot, part: str) -> AlterPartitionPayload:
    p = b.partition(t, part)
    return AlterPartitionPayload(t, p, p, is_truncate=True)


def _final_state(root: Path, events: list[Event], replay: bool) -> tuple[object, dict[str, bytes]]:
    env = make_env(root)
    for step in plan(events, {}).steps:
        env.applier.apply(step)
        if replay:
            env.applier.apply(step)  # as if it crashed after the change: the replay applies it again
    return env.catalog.dump(), env.files()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_replaying_every_step_converges_to_the_same_state(ops: list[tuple[str, str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        events = build_events(root, ops)
        once = _final_state(root / "t", events, replay=False)
        shutil.rmtree(root / "t")
        twice = _final_state(root / "t", events, replay=True)
        assert twice == once
        assert not list(root.rglob(f"{TMP_PREFIX}*"))


def test_managed_rename_never_shows_a_table_without_its_files(env: Env) -> None:
    """At every catalog call of a rename, each name the catalog knows points at complete data."""
    t = env.table("t", ("p",))
    f = env.file(t, "p=1/f", b"1")
    env.run([b.create_db(1, "a"), b.create_table(2, t), b.add_partition(3, t, [b.partition(t, "1")], [f])])
    u = dataclasses.replace(t, name="u", sd=dataclasses.replace(t.sd, location=f"file://{env.src}/a.db/u"))
    seen: list[str] = []

    def visible_files() -> None:
        for name in env.catalog.list_tables("a"):
            for p in env.catalog.list_partitions("a", name):
                location = Path((p.sd.location or "").removeprefix("file://"))
                assert (location / "f").read_bytes() == b"1", f"{name} partition at {location} lacks its file"
                seen.append(name)

    for method in ("alter_table", "alter_partitions"):
        original = getattr(env.catalog, method)

        def checked(*args: object, _original: Any = original) -> Any:
            visible_files()
            result = _original(*args)
            visible_files()
            return result

        setattr(env.catalog, method, checked)
    env.run([b.alter_table(4, t, u)])
    assert "t" in seen and "u" in seen
    assert env.files() == {"a.db/u/p=1/f": b"1"}  # the old tree is gone at the end


@pytest.mark.parametrize("target_dir", ["file:/wh/a.db/t", "file:///wh/a.db/t", "/wh/a.db/t/"])
def test_overwrite_keeps_what_it_published_whatever_the_location_spelling(target_dir: str) -> None:
    from streamer.target.apply.writes import _top_level

    assert _top_level("file:///wh/a.db/t/000000_0", target_dir) == "000000_0"
    assert _top_level("/wh/a.db/t/p=1/000000_0", target_dir) == "p=1"
    with pytest.raises(ApplyError):
        _top_level("file:///elsewhere/000000_0", target_dir)


def test_a_halt_is_reported_before_any_later_step_is_applied(env: Env) -> None:
    """The target job publishes a halt from ``on_halt``: readers must know of it before another
    database moves past the halted event (streamer.target.job.watermark)."""
    t = env.table("t")
    env.run([b.create_db(1, "a"), b.create_db(2, "b"), b.create_table(3, t)])
    bad = dataclasses.replace(env.file(t, "f", b"x"), checksum="0" * 64)
    u = env.table("u", db="b")
    seen: list[tuple[str, str | None]] = []

    def on_halt(db: str) -> None:
        seen.append((db, next(iter(env.catalog.list_tables("b")), None)))

    events = [b.insert(4, t, [bad]), b.create_table(5, u)]
    report = run_plan(env.applier, plan(events, env.applier.load_progress(), env.state.halts()), env.state,
                      on_halt=on_halt)
    assert seen == [("a", None)]  # b.u (event 5) was not there yet when the halt was reported
    assert report.applied == [5]


def test_a_batch_reads_each_database_once_and_writes_its_marker_once(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.applier.markers.per_batch = True  # target run --markers-per-batch
    assert env.run([b.create_db(1, "a"), b.create_db(2, "b")]) == [1, 2]
    tables = [env.table(f"t{i}", db="ab"[i % 2]) for i in range(DEFER_MIN_EVENTS)]
    events = [b.create_table(3 + i, t) for i, t in enumerate(tables)]
    the_plan = plan(events, env.applier.load_progress(), {})
    reads: list[str] = []
    read = env.catalog.get_database
    monkeypatch.setattr(env.catalog, "get_database", lambda name: reads.append(name) or read(name))
    calls = len(env.catalog.calls)
    assert run_plan(env.applier, the_plan, env.state).applied == [e.event_id for e in events]
    assert sorted(reads) == ["a", "b"]  # later steps reuse what the first step of each read
    assert env.catalog.calls[calls:].count("alter_database") == 2  # repl.last.id once per database
    marks = {name: env.catalog.databases[name].parameters[LAST_ID_PARAM] for name in "ab"}
    assert marks == {"a": str(events[-2].event_id), "b": str(events[-1].event_id)}
    assert not (env.state.dir / JOURNAL_FILE).read_text()  # covered by the markers

    # a small batch (live traffic) writes the marker after every step
    calls = len(env.catalog.calls)
    small = [b.create_table(20 + i, env.table(f"s{i}")) for i in range(3)]
    assert env.run(small) == [20, 21, 22]
    assert env.catalog.calls[calls:].count("alter_database") == 3

    # nothing is kept from one batch to the next: a change made between batches survives
    other = env.catalog.databases["a"]
    env.catalog.databases["a"] = dataclasses.replace(other, parameters={**other.parameters, "note": "x"})
    reads.clear()
    assert env.run([b.create_table(30, env.table("t30", db="a"))]) == [30]
    assert env.catalog.databases["a"].parameters["note"] == "x"
    assert env.catalog.databases["a"].parameters[LAST_ID_PARAM] == "30"


def test_a_batch_reads_a_table_it_created_or_altered_only_once(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interleaved alters of one table (not coalesced: another database's events lie between) read
    it once per batch; any other kind of step, and a new batch, read it again."""
    assert env.run([b.create_db(1, "a"), b.create_db(2, "b")]) == [1, 2]
    c = env.table("c")
    bumps = [dataclasses.replace(c, parameters={"seq": str(i)}) for i in range(4)]
    events = [b.create_table(3, c)]
    for i in range(1, 4):  # c bumped, then a table of database b, three times
        other = env.table(f"u{i}", db="b")
        events += [b.alter_table(2 + 2 * i, bumps[i - 1], bumps[i]), b.create_table(3 + 2 * i, other)]
    reads: list[str] = []
    read = env.catalog.get_table
    monkeypatch.setattr(env.catalog, "get_table", lambda db, t: reads.append(f"{db}.{t}") or read(db, t))
    assert env.run(events) == list(range(3, 10))
    assert reads.count("a.c") == 1  # by the create (absent); the three alters reuse what it wrote
    assert env.catalog.get_table("a", "c").parameters["seq"] == "3"  # type: ignore[union-attr]
    assert env.catalog.calls.count("alter_table") == 3  # each bump still reaches the metastore
    assert env.catalog.databases["a"].parameters[LAST_ID_PARAM] == "8"

    # an insert into c between two bumps changes no table object: c is read once, by event 10
    reads.clear()
    f = env.file(bumps[3], "f1", b"x")
    assert env.run([b.alter_table(10, bumps[3], bumps[0]), b.insert(11, bumps[0], [f]),
                    b.alter_table(12, bumps[0], bumps[1])]) == [10, 11, 12]
    assert reads.count("a.c") == 1  # event 10 (new batch); 11 and 12 reuse it

    # nothing is kept from one batch to the next: a change made between batches is seen
    stored = env.catalog.tables[("a", "c")]
    env.catalog.tables[("a", "c")] = dataclasses.replace(stored, parameters={**stored.parameters, "seq": "x"})
    reads.clear()
    assert env.run([b.alter_table(13, bumps[1], bumps[1])]) == [13]
    assert reads == ["a.c"]
    assert env.catalog.get_table("a", "c").parameters["seq"] == "1"  # type: ignore[union-attr]


def test_a_bootstrap_step_forgets_the_remembered_tables(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bootstrap record replaces tables by its own rules: a later alter must not trust what an
    earlier create of the batch wrote."""
    import streamer.target.apply.bootstrap as bootstrap
    from streamer.target.apply.plan import Step, StepKind

    assert env.run([b.create_db(1, "a")]) == [1]
    c = env.table("c")

    def rewrite_c(applier: Applier, step: Step) -> None:
        stored = env.catalog.tables[("a", "c")]
        changed = {**stored.parameters, "x": "y"}
        env.catalog.tables[("a", "c")] = dataclasses.replace(stored, parameters=changed)

    monkeypatch.setattr(bootstrap, "apply_bootstrap", rewrite_c)
    create, alter = b.create_table(2, c), b.alter_table(4, c, c)  # the alter re-states c as created
    with env.applier.reusing_snapshots():
        env.applier.apply(Step(StepKind.EVENT, (create,), "a"))
        env.applier.apply(Step(StepKind.BOOTSTRAP, (create,), "a"))
        env.applier.apply(Step(StepKind.EVENT, (alter,), "a"))
    assert "x" not in env.catalog.tables[("a", "c")].parameters  # the alter read c again and restored it


@pytest.mark.parametrize("away", ["rename", "drop"])
def test_a_table_moved_or_dropped_in_a_batch_is_created_again_for_real(env: Env, away: str) -> None:
    """create a.t, (rename a.t -> a.u | drop a.t), create a.t in one batch, with another database's
    events between (nothing coalesces or collapses): the second create must not trust the first."""
    assert env.run([b.create_db(1, "a"), b.create_db(2, "b")]) == [1, 2]
    t, u = env.table("t"), env.table("u")
    gone = b.alter_table(5, t, u) if away == "rename" else b.drop_table(5, t)
    events = [b.create_table(3, t), b.create_table(4, env.table("x4", db="b")), gone,
              b.create_table(6, env.table("x6", db="b")), b.create_table(7, t)]
    assert env.run(events) == [3, 4, 5, 6, 7]
    assert env.catalog.get_table("a", "t") is not None
    assert (env.catalog.get_table("a", "u") is not None) == (away == "rename")


def test_a_batch_journals_each_step_and_a_restart_resumes_after_the_last_applied_one(env: Env) -> None:
    """Markers per batch: a job killed mid-batch left its steps in the journal, not in repl.last.id;
    the next applier starts after the last applied step (no step is applied twice)."""
    env.applier.markers.per_batch = True  # target run --markers-per-batch
    from streamer.target.apply.journal import ProgressJournal

    assert env.run([b.create_db(1, "a")]) == [1]
    tables = [env.table(f"t{i}") for i in range(3)]
    the_plan = plan([b.create_table(2 + i, t) for i, t in enumerate(tables)], env.applier.load_progress(), {})
    journal = ProgressJournal(env.state.dir)
    with pytest.raises(RuntimeError), env.applier.batch():
        for step in the_plan.steps[:2]:
            env.applier.apply(step)
        assert journal.read() == {"a": 3}
        raise RuntimeError("killed")  # the batch never ends: its markers are not written
    assert env.catalog.databases["a"].parameters[LAST_ID_PARAM] == "1"
    paths = env.applier.paths
    restarted = Applier(env.catalog, FileCopier(max_workers=2), paths, b.SOURCE_ID, state=env.state)
    assert restarted.load_progress()["a"] == 3
    assert env.catalog.databases["a"].parameters[LAST_ID_PARAM] == "3"  # caught up before any new step
    again = plan([b.create_table(2 + i, t) for i, t in enumerate(tables)], restarted.progress, {})
    assert again.event_ids == (4,)
    assert run_plan(restarted, again, env.state).applied == [4]
    assert env.catalog.databases["a"].parameters[LAST_ID_PARAM] == "4"  # the restart's batch wrote it
    assert journal.read() == {}  # covered by the markers


def test_the_journal_syncs_before_a_step_changes_an_object_an_unsynced_step_changed(tmp_path: Path) -> None:
    from streamer.target.apply import journal as j

    synced: list[int] = []
    journal = j.ProgressJournal(tmp_path)
    journal._sync_locked = lambda: (synced.append(1), journal._unsynced.clear())  # type: ignore[method-assign]
    journal.before_step({("a", "t")})
    journal.before_step({("a", "u")})
    assert synced == []  # distinct objects: re-applying either after a host crash shows no older state
    journal.before_step({("a", "t")})
    assert synced == [1]
    journal.before_step({j.ANY_OBJECT})
    assert synced == [1, 1]
    journal.record("a", 7)
    (tmp_path / j.JOURNAL_FILE).open("a").write("a\t9")  # a torn line: no newline
    assert journal.read() == {"a": 7}


def test_markers_a_failed_write_left_owed_are_written_by_the_next_batch(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.applier.markers.per_batch = True  # target run --markers-per-batch
    assert env.run([b.create_db(1, "a")]) == [1]
    events = [b.create_table(2 + i, env.table(f"t{i}")) for i in range(DEFER_MIN_EVENTS)]
    real = env.catalog.alter_database
    monkeypatch.setattr(env.catalog, "alter_database", lambda *a, **k: (_ for _ in ()).throw(OSError("down")))
    with pytest.raises(OSError):
        run_plan(env.applier, plan(events, env.applier.load_progress(), {}), env.state)
    monkeypatch.setattr(env.catalog, "alter_database", real)
    assert run_plan(env.applier, plan([], env.applier.progress, {}), env.state).applied == []
    assert env.catalog.databases["a"].parameters[LAST_ID_PARAM] == str(events[-1].event_id)
