"""The metric sets: one per role, ``db`` labels that name target databases, no series of a dropped one.

Runs the real applier on the in-memory catalog and real temp dirs; reads values from the registries.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import itertools
import platform
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase

from streamer import metrics
from streamer.events.model import Event, EventType, OpenTxnPayload
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import GLOBAL_DB, plan
from streamer.target.apply.runner import run_plan
from streamer.target.job.watermark import Watermark, WatermarkPublisher
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b

_names = itertools.count()


def _unique(prefix: str) -> str:
    """A database name no other test sets a series for (the registries are process-wide)."""
    return f"{prefix}_{next(_names)}"


def _families(registry: object) -> set[str]:
    return {family.name for family in registry.collect()}  # type: ignore[attr-defined]


def _series(name: str) -> dict[str, float]:
    """db label -> value of every sample of ``name``."""
    out: dict[str, float] = {}
    for family in metrics.REGISTRY.collect():
        for sample in family.samples:
            if sample.name == name and "db" in sample.labels:
                out[sample.labels["db"]] = sample.value
    return out


def _applier(root: Path, db_map: dict[str, str] | None = None) -> tuple[Applier, TargetState]:
    state = TargetState(root / "state")
    (root / "wh").mkdir(parents=True, exist_ok=True)
    paths = TargetPaths(str(root / "wh"), str(root / "ext"))
    copier = FileCopier(max_workers=1)
    applier = Applier(MemoryCatalog(), copier, paths, b.SOURCE_ID, state=state, db_map=db_map)
    return applier, state


def _run(applier: Applier, state: TargetState, events: list[Event]) -> None:
    run_plan(applier, plan(events, applier.load_progress(), state.halts()), state)


def _common(name: str) -> bool:
    """Families every role exports: what the process is, not what it does."""
    return name == "streamer_build_info" or name.startswith("process_")


def test_each_role_registry_holds_only_its_own_families() -> None:
    source, target = _families(metrics.SOURCE_REGISTRY), _families(metrics.TARGET_REGISTRY)
    assert source and all(name.startswith("streamer_source_") or _common(name) for name in source)
    assert target and all(name.startswith(("streamer_target_", "streamer_verify_")) or _common(name)
                          for name in target)
    assert {name for name in source if _common(name)} == {name for name in target if _common(name)}
    assert _families(metrics.REGISTRY) == source | target
    agent_page = generate_latest(metrics.REGISTRIES[metrics.Role.SOURCE]).decode()
    assert "streamer_target_" not in agent_page and "streamer_verify_" not in agent_page
    assert "streamer_source_" not in generate_latest(metrics.TARGET_REGISTRY).decode()


def test_every_exported_metric_is_in_exactly_one_role() -> None:
    defined = [m for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)]
    for metric in defined:
        roles = [role for role, registry in metrics.REGISTRIES.items() if metric._name in _families(registry)]
        assert len(roles) == 1, (metric._name, roles)


def test_last_applied_is_labelled_with_the_target_name_under_db_map(tmp_path: Path) -> None:
    source, target = _unique("sales"), _unique("sales_dr")
    applier, state = _applier(tmp_path, {source: target})
    _run(applier, state, [b.create_db(1, source), b.create_table(2, b.table(source, "t"))])
    applied = _series("streamer_target_last_applied_event_id")
    assert applied.get(target) == 2
    assert source not in applied


def test_database_less_events_make_no_global_series(tmp_path: Path) -> None:
    applier, state = _applier(tmp_path)
    _run(applier, state, [b.event(1, EventType.OPEN_TXN, OpenTxnPayload([7]))])
    assert state.applied().get(GLOBAL_DB) == 1  # applied, only not labelled
    assert GLOBAL_DB not in _series("streamer_target_last_applied_event_id")


def test_a_dropped_database_leaves_no_series_and_none_comes_back(tmp_path: Path) -> None:
    gone, kept = _unique("gone"), _unique("kept")
    applier, state = _applier(tmp_path)
    _run(applier, state, [b.create_db(1, gone), b.create_db(2, kept)])
    for db in (gone, kept):  # series other writers set (verification, publishes, halts)
        metrics.VERIFY_DRIFT_OBJECTS.labels(db=db, kind="file").set(3)
        metrics.TARGET_NONATOMIC_PUBLISHES.labels(db=db).inc()
        metrics.TARGET_TABLES_SYNCED_BY_STATE.labels(db=db).set(1)
    publisher = WatermarkPublisher(applier.catalog, None, "", b.SOURCE_ID)
    publisher.publish(Watermark(2, {gone: 1, kept: 2}))
    _run(applier, state, [b.drop_db(3, gone)])
    publisher.publish(Watermark(3, {gone: 3, kept: 3}))  # the record still names it (readers)
    applier.load_progress()  # as on a restart: the state file still holds its progress
    page = generate_latest(metrics.REGISTRY).decode()
    assert f'db="{gone}"' not in page
    assert page.count(f'db="{kept}"') >= 5
    metrics.database_created(gone)  # a new process knows nothing of the drop ...
    restarted, _ = _applier(tmp_path)
    restarted.catalog = applier.catalog
    restarted.load_progress()  # ... until it reads its progress: the state file's, not the catalog's
    WatermarkPublisher(applier.catalog, None, "", b.SOURCE_ID).publish(Watermark(3, {gone: 3, kept: 3}))
    assert gone not in _series("streamer_target_db_watermark_event_id")
    _run(applier, state, [b.create_db(4, gone)])  # created again: its series are back
    publisher.publish(Watermark(4, {gone: 4, kept: 4}))
    assert _series("streamer_target_last_applied_event_id")[gone] == 4
    assert _series("streamer_target_db_watermark_event_id")[gone] == 4


@settings(max_examples=50, deadline=None)
@given(
    series=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["file", "table", "partition"])),
        min_size=1,
        max_size=12,
    ),
    dropped=st.sampled_from(["a", "b", "c"]),
)
def test_forget_database_removes_exactly_that_databases_series(
    series: list[tuple[str, str]], dropped: str
) -> None:
    run = _unique("p")
    names = {db: f"{run}_{db}" for db in "abc"}
    for db, kind in series:
        metrics.VERIFY_SOURCE_DRIFT_OBJECTS.labels(db=names[db], kind=kind).set(1)
        metrics.TARGET_HALTED.labels(db=names[db]).set(1)
    metrics.forget_database(names[dropped].upper())  # names are case-insensitive, as Hive's
    left = {
        (s.labels["db"], s.labels.get("kind"))
        for f in metrics.REGISTRY.collect()
        for s in f.samples
        if s.labels.get("db", "").startswith(run + "_")
    }
    expected: set[tuple[str, str | None]] = {(names[db], kind) for db, kind in series if db != dropped}
    expected |= {(names[db], None) for db, _ in series if db != dropped}
    assert left == expected


# --- what is there from the start (issue 40, SRE basics) ---

_FRESH_PAGES = """
import sys
from prometheus_client import generate_latest
from streamer import metrics
role = metrics.Role(sys.argv[1])
sys.stdout.write(generate_latest(metrics.REGISTRIES[role]).decode())
"""


def _fresh_page(role: metrics.Role) -> str:
    """A role's /metrics page in a new process, before it did anything."""
    done = subprocess.run([sys.executable, "-c", _FRESH_PAGES, role.value], capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout


def test_a_new_agent_shows_every_error_kind_at_zero() -> None:
    page = _fresh_page(metrics.Role.SOURCE)
    for kind in metrics.SOURCE_ERROR_KINDS:
        assert f'streamer_source_errors_total{{kind="{kind}"}} 0.0' in page, kind
    assert "streamer_source_gap 0.0" in page


def test_the_error_kinds_are_every_kind_the_agent_counts() -> None:
    """A kind counted but not listed would appear at 1, which increase() never sees."""
    from streamer.errors import DecodeError
    from streamer.source import agent, prepare
    from streamer.source.errors import RecordTooLargeError

    counted = set(re.findall(r'SOURCE_ERRORS\.labels\("([a-z_]+)"\)', inspect.getsource(agent)))
    assert counted, "the agent counts no literal kind any more: update this test"
    counted.add(prepare.failure_kind(DecodeError("x", event_id=1)))
    counted.add(prepare.failure_kind(RecordTooLargeError(1, "INSERT", None, 2, 1)))
    assert counted == set(metrics.SOURCE_ERROR_KINDS)


def test_a_new_target_shows_its_failure_flags_at_zero() -> None:
    page = _fresh_page(metrics.Role.TARGET)
    for line in ("streamer_target_data_loss 0.0", "streamer_target_watermark_write_failures_total 0.0",
                 "streamer_verify_failures_total 0.0"):
        assert line in page, line


def test_every_database_with_a_position_has_a_halt_flag_from_the_start() -> None:
    db = _unique("positioned")
    assert db not in _series("streamer_target_halted")
    metrics.TARGET_LAST_APPLIED.labels(db=db).set(7)  # as load_progress sets it at start
    assert _series("streamer_target_halted")[db] == 0
    metrics.TARGET_HALTED.labels(db=db).set(1)
    assert _series("streamer_target_halted")[db] == 1  # a halt is never overwritten by the 0
    metrics.forget_database(db)
    assert db not in _series("streamer_target_halted")
    metrics.database_created(db)


def test_both_roles_tell_their_build_and_process() -> None:
    for role in metrics.Role:
        page = _fresh_page(role)
        version = importlib.metadata.version("streamer")
        assert f'streamer_build_info{{python="{platform.python_version()}",version="{version}"}} 1.0' in page
        if sys.platform.startswith("linux"):  # the process collector reads /proc
            assert "process_resident_memory_bytes " in page and "process_cpu_seconds_total " in page
    union = generate_latest(metrics.REGISTRY).decode()
    assert union.count("# TYPE streamer_build_info gauge") == 1  # one family, however many roles
    assert union.count("# TYPE process_start_time_seconds gauge") <= 1
