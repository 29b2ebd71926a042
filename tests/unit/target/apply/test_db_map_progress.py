"""``--db-map`` and progress: a source database's progress is read from, and written to, the database
it is mapped to, never from a target database that merely bears its name.

The operator's report: ``streamer target run --db-map hr:hr7 --db-map sales:sales7 --until-event 37``
exited 0 with ``sales7`` replicated and ``hr7`` never created, when the target already held a
replicated database ``hr`` (an earlier run without the map): its ``repl.last.id`` was read as the
progress of the source's ``hr``, and the planner dropped ``hr``'s events as already applied.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.errors import ApplyError
from streamer.events.codec import encode_event
from streamer.events.model import DatabaseSnapshot, Event, TableSnapshot
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM, REPL_TARGET_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target import db_map as names
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.dr.verify import VerifySettings, _Verifier
from streamer.target.job.bounded import UntilReached
from streamer.target.job.settings import (
    KafkaSettings,
    LayoutSettings,
    MetastoreSettings,
    TargetSettings,
)
from streamer.target.job.streaming import BatchApplier
from tests.unit.target import builders as b
from tests.unit.target.apply.test_apply import Env, make_env

# --- the scenario ---------------------------------------------------------------------------------


def stale_hr(catalog: MemoryCatalog, last_id: int) -> tuple[DatabaseSnapshot, TableSnapshot]:
    """A database ``hr`` an earlier run of this source (without ``--db-map``) replicated, with a
    table of its own: what this job must leave exactly as it is."""
    db = DatabaseSnapshot(
        name="hr", location="file:///earlier/hr.db",
        parameters={REPL_SOURCE_PARAM: b.SOURCE_ID, REPL_TARGET_PARAM: b.SOURCE_ID,
                    LAST_ID_PARAM: str(last_id)},
    )
    catalog.create_database(db)
    old = b.table("hr", "old", location="file:///earlier/hr.db/old")
    old = dataclasses.replace(old, parameters={REPL_SOURCE_PARAM: b.SOURCE_ID})
    catalog.create_table(old)
    return db, old


def workload(src: Path) -> list[Event]:
    """Events 31..37 of source databases ``hr`` and ``sales``: creates, tables, inserts with files."""
    t = b.table("hr", "t", location=f"file://{src}/hr.db/t")
    s = b.table("sales", "s", location=f"file://{src}/sales.db/s")
    f1 = b.write_source_file(src / "hr.db/t", "000000_0", b"hr one")
    f2 = b.write_source_file(src / "hr.db/t", "000001_0", b"hr two")
    g1 = b.write_source_file(src / "sales.db/s", "000000_0", b"sales one")
    return [
        b.create_db(31, "hr"),
        b.create_table(32, t),
        b.insert(33, t, [f1]),
        b.create_db(34, "sales"),
        b.create_table(35, s),
        b.insert(36, t, [f2]),
        b.insert(37, s, [g1]),
    ]


HR_FILES = {"000000_0": b"hr one", "000001_0": b"hr two"}


def files_under(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    }


def assert_replicated(env: Env, hr_target: str, before: tuple[DatabaseSnapshot, TableSnapshot]) -> None:
    """Everything of source ``hr`` is in ``hr_target``, and the stale ``hr`` is untouched."""
    assert env.state.halts() == {}
    hr = env.catalog.get_database(hr_target)
    assert hr is not None, f"{hr_target} was never created: the events of source hr were dropped"
    assert hr.parameters[LAST_ID_PARAM] == "36" and hr.parameters[REPL_SOURCE_PARAM] == b.SOURCE_ID
    assert env.catalog.list_tables(hr_target) == ["t"]
    assert files_under(env.wh / f"{hr_target}.db") == {f"t/{k}": v for k, v in HR_FILES.items()}
    sales = env.catalog.get_database("sales7")
    assert sales is not None and sales.parameters[LAST_ID_PARAM] == "37"
    assert files_under(env.wh / "sales7.db") == {"s/000000_0": b"sales one"}
    # the stale hr: same object, same table, no files written for it
    assert env.catalog.get_database("hr") == before[0]
    assert env.catalog.list_tables("hr") == ["old"] and env.catalog.get_table("hr", "old") == before[1]
    assert not (env.wh / "hr.db").exists()


def restarted(env: Env) -> Env:
    """The same catalog and state dir, a new applier (a new process: progress read back)."""
    paths = TargetPaths(str(env.wh), str(env.root / "ext"))
    applier = Applier(env.catalog, FileCopier(max_workers=2), paths, b.SOURCE_ID, state=env.state,
                      db_map=env.applier.db_map)
    return dataclasses.replace(env, applier=applier)


def test_a_mapped_database_gets_its_events_although_the_target_has_one_of_its_source_name(
    tmp_path: Path,
) -> None:
    """Exactly the report: ``hr`` on the target at repl.last.id 40, ``--db-map hr:hr7 sales:sales7``,
    events 31..37. Before the fix, ``hr``'s 40 was read as source ``hr``'s progress: no event of it
    was applied, no halt, ``hr7`` never created."""
    env = make_env(tmp_path, db_map={"hr": "hr7", "sales": "sales7"})
    before = stale_hr(env.catalog, 40)
    assert env.run(workload(env.src)) == [31, 32, 33, 34, 35, 36, 37]
    assert_replicated(env, "hr7", before)
    assert env.applier.load_progress() == {"hr": 36, "sales": 37}
    assert restarted(env).applier.load_progress() == {"hr": 36, "sales": 37}


@pytest.mark.parametrize("target", ["hr7", "a_hr"])  # listed after / before the stale "hr"
@pytest.mark.parametrize("stale_id", [10, 30, 31, 33, 36, 37, 40, 1000])  # lower, between and higher
@pytest.mark.parametrize("split", [None, 33])  # one batch, or two with a restart between them
def test_the_stale_databases_id_lower_or_higher_never_decides_what_is_applied(
    tmp_path: Path, target: str, stale_id: int, split: int | None
) -> None:
    env = make_env(tmp_path, db_map={"hr": target, "sales": "sales7"})
    before = stale_hr(env.catalog, stale_id)
    events = workload(env.src)
    if split is None:
        applied = env.run(events)
    else:
        applied = env.run([e for e in events if e.event_id <= split])
        env = restarted(env)
        assert env.applier.load_progress()["hr"] == 33  # hr's own marker, whichever sorts first
        applied += env.run(events)  # a replay of the whole batch: 31..33 already applied
    assert applied == [31, 32, 33, 34, 35, 36, 37]
    assert_replicated(env, target, before)
    assert restarted(env).applier.load_progress() == {"hr": 36, "sales": 37}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stale_id=st.integers(0, 80),
    target=st.sampled_from(["hr7", "a_hr", "zz"]),
    cuts=st.lists(st.integers(31, 37), max_size=3, unique=True).map(sorted),
    per_batch=st.booleans(),
)
def test_property_every_event_of_a_mapped_database_lands_in_it(
    stale_id: int, target: str, cuts: list[int], per_batch: bool
) -> None:
    """Whatever the stale ``hr``'s id, however the stream is cut into batches (each batch replayed
    from its start after a restart, as Spark re-delivers): every event of ``hr`` ends in its mapped
    database, each exactly once, and ``hr`` is left as it was."""
    with tempfile.TemporaryDirectory() as tmp:
        env = make_env(Path(tmp), db_map={"hr": target, "sales": "sales7"}, markers_per_batch=per_batch)
        before = stale_hr(env.catalog, stale_id)
        events = workload(env.src)
        applied: list[int] = []
        start = 31
        for end in [*cuts, 37]:
            applied += env.run([e for e in events if start - 1 <= e.event_id <= end])  # one replayed
            env = restarted(env)
            start = end + 1
        assert applied == [31, 32, 33, 34, 35, 36, 37]
        assert_replicated(env, target, before)


# --- the job, bounded, as the operator ran it ---------------------------------------------------


def test_the_bounded_job_with_db_maps_replicates_hr_into_hr7_not_past_it(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    before = stale_hr(catalog, 40)
    events = workload(tmp_path / "src")
    job_settings = TargetSettings(
        source_id=b.SOURCE_ID,
        kafka=KafkaSettings(bootstrap_servers="unused:9092", topic="t", until_event=37),
        metastore=MetastoreSettings(uri="thrift://unused:1"),
        layout=LayoutSettings(
            warehouse_root=f"file://{tmp_path}/wh", state_dir=str(tmp_path / "state"),
            checkpoint_dir=str(tmp_path / "ckpt"), db_map={"hr": "hr7", "sales": "sales7"},
        ),
    )
    job = BatchApplier(job_settings, catalog)
    past = b.create_db(38, "late")
    with pytest.raises(UntilReached):
        job.process([(offset, encode_event(e)) for offset, e in enumerate([*events, past])])
    assert job.reached_until and job.state.halts() == {}
    hr7 = catalog.get_database("hr7")
    assert hr7 is not None and hr7.parameters[LAST_ID_PARAM] == "36"
    assert files_under(tmp_path / "wh" / "hr7.db") == {f"t/{k}": v for k, v in HR_FILES.items()}
    assert catalog.get_database("hr") == before[0] and catalog.list_tables("hr") == ["old"]
    assert catalog.get_database("late") is None


# --- two source databases into one target database: halted, never mixed ----------------------------


def test_a_source_database_whose_name_another_is_mapped_to_halts_with_its_event(tmp_path: Path) -> None:
    """``--db-map sales:hr`` and a source ``hr`` without a map: both would go into target ``hr``.
    ``sales`` is replicated there; ``hr`` halts at its first event, naming the clash."""
    env = make_env(tmp_path, db_map={"sales": "hr"})
    s = b.table("sales", "s")
    t = b.table("hr", "t")
    applied = env.run([b.create_db(1, "sales"), b.create_table(2, s),
                       b.create_db(3, "hr"), b.create_table(4, t)])
    assert applied == [1, 2]
    halt = env.state.halts()["hr"]
    assert halt.event_id == 3 and halt.event_type == "CREATE_DATABASE" and halt.object == "hr"
    assert "'sales'" in halt.cause and "target database 'hr'" in halt.cause
    assert env.catalog.list_tables("hr") == ["s"]
    assert env.applier.load_progress() == {"sales": 2}  # target hr holds sales's progress only


def test_two_sources_mapped_to_one_target_both_halt(tmp_path: Path) -> None:
    env = make_env(tmp_path, db_map={"a": "x", "b": "x"})
    assert env.run([b.create_db(1, "a"), b.create_db(2, "b")]) == []
    halts = env.state.halts()
    assert (halts["a"].event_id, halts["b"].event_id) == (1, 2)
    assert env.catalog.list_databases() == []


# --- the names, both ways (pure) ------------------------------------------------------------------


def test_source_name_is_the_inverse_of_target_name_and_none_for_a_name_mapped_away() -> None:
    m = names.normalized({"HR": "hr7", "sales": "sales7", "a": "b", "b": "a"})
    for source in ["hr", "sales", "a", "b", "other"]:
        assert names.source_name(m, names.target_name(m, source)) == source
    assert names.source_name(m, "hr") is None and names.source_name(m, "sales") is None
    assert names.source_name(m, "HR7") == "hr"
    assert names.source_name(names.normalized({"a": "x", "b": "x"}), "x") is None
    with pytest.raises(ApplyError, match="refusing to mix two source databases"):
        names.check_mapping(names.normalized({"sales": "hr"}), "hr")
    assert names.check_mapping(m, "hr") == "hr7" and names.check_mapping(m, "other") == "other"


@given(
    mapping=st.dictionaries(st.sampled_from("abcdef"), st.sampled_from("abcdefgh"), max_size=4),
    target=st.sampled_from("abcdefgh"),
)
def test_property_a_target_is_read_back_only_as_the_source_that_maps_to_it(
    mapping: dict[str, str], target: str
) -> None:
    source = names.source_name(mapping, target)
    if source is not None:
        assert names.target_name(mapping, source) == target
        assert names.check_mapping(mapping, source) == target  # no other source shares it
    mapped_here = [s for s, t in mapping.items() if t == target]
    if len(mapped_here) == 1:
        assert source == mapped_here[0]


# --- verify judges the mapped replica -----------------------------------------------------------


@pytest.mark.parametrize("target", ["hr7", "a_hr"])  # listed after / before the stale "hr"
def test_verify_positions_read_the_mapped_database_not_the_one_with_the_source_name(
    tmp_path: Path, target: str
) -> None:
    catalog = MemoryCatalog()
    stale_hr(catalog, 40)
    catalog.create_database(DatabaseSnapshot(
        name=target, parameters={REPL_SOURCE_PARAM: b.SOURCE_ID, LAST_ID_PARAM: "36"}))
    verify_settings = VerifySettings(
        hms_uri="memory", state_dir=str(tmp_path / "state"), bootstrap_servers="-", topic="-",
        source_id=b.SOURCE_ID, warehouse_root=str(tmp_path / "wh"), db_map={"hr": target},
    )
    assert _Verifier(verify_settings, catalog, lambda: iter(())).positions() == {"hr": 36}
