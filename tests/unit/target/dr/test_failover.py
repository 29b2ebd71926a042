"""Failover: the cut (pure), promotion of replicated databases, fencing of the job, idempotency."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.events.model import DatabaseSnapshot
from streamer.metastore.catalog import (
    FAILOVER_CUT_PARAM,
    FENCE_PARAM,
    LAST_ID_PARAM,
    READONLY_PARAM,
    REPL_SOURCE_PARAM,
    REPL_TARGET_PARAM,
)
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.dr.failover import (
    FailedOverError,
    FailoverError,
    JobLock,
    JobRunningError,
    compute_cut,
    failover,
    read_record,
    refuse_if_failed_over,
)
from streamer.target.job.settings import KafkaSettings, LayoutSettings, MetastoreSettings, TargetSettings
from streamer.target.job.streaming import BatchApplier
from streamer.target.state.state_file import TargetState
from streamer.target.state.status import write_progress
from tests.unit.target import builders as b
from tests.unit.target.holder import held_elsewhere


def test_cut_is_the_least_replicated_point() -> None:
    cut = compute_cut({"a": 10, "b": 4, "c": 7}, 12, halted={"c": 8}, stuck=(), source_head=20,
                      new_primary_event_id=3)
    through = {d.db: d.replicated_through_event_id for d in cut.databases}
    assert through == {"a": 12, "b": 12, "c": 7}  # a halted database stops at its last applied event
    assert cut.event_id == 7 and cut.unreplicated == 13
    assert [d.halted_at for d in cut.databases] == [None, None, 8]
    assert cut.new_primary_event_id == 3


@given(st.dictionaries(st.sampled_from("abcde"), st.integers(0, 50)), st.integers(0, 60),
       st.sets(st.sampled_from("abcde")), st.one_of(st.none(), st.integers(0, 80)))
def test_cut_never_claims_more_than_is_applied(applied: dict[str, int], consumed: int, stuck: set[str],
                                              head: int | None) -> None:
    cut = compute_cut(applied, consumed, {}, stuck, head)
    for d in cut.databases:
        assert d.replicated_through_event_id >= d.last_applied_event_id
        if d.db in stuck:
            assert d.replicated_through_event_id == d.last_applied_event_id
        assert cut.event_id <= d.replicated_through_event_id
    if head is not None:
        assert cut.unreplicated == max(0, head - cut.event_id)


def replica(catalog: MemoryCatalog, name: str, last: int, *, readonly: bool = False) -> None:
    params = {REPL_SOURCE_PARAM: b.SOURCE_ID, REPL_TARGET_PARAM: b.SOURCE_ID, LAST_ID_PARAM: str(last)}
    if readonly:
        params[READONLY_PARAM] = "true"
    catalog.create_database(DatabaseSnapshot(name=name, parameters=params))


def test_failover_promotes_records_and_is_idempotent(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    replica(catalog, "a", 9, readonly=True)
    replica(catalog, "b", 5)
    catalog.create_database(DatabaseSnapshot(name="mine", parameters={"x": "1"}))  # not a replica
    write_progress(tmp_path, {}, 11)
    done = failover(tmp_path, catalog, source_id=b.SOURCE_ID, source_head=14, new_primary_event_id=0)
    assert done.state == "done" and done.cut is not None
    assert done.cut.event_id == 11 and done.cut.unreplicated == 3
    assert done.changed == ("a", "b")
    for name in ("a", "b"):
        params = catalog.get_database(name).parameters  # type: ignore[union-attr]
        assert REPL_TARGET_PARAM not in params and READONLY_PARAM not in params
        assert params[FAILOVER_CUT_PARAM] == "11"
    assert catalog.get_database("mine").parameters == {"x": "1"}  # type: ignore[union-attr]

    again = failover(tmp_path, catalog, source_id=b.SOURCE_ID, source_head=99)
    assert again == done == read_record(tmp_path)  # the first cut stands
    with pytest.raises(FailedOverError, match="failed over at source event 11"):
        refuse_if_failed_over(tmp_path)


def test_failover_of_an_unknown_source_is_refused(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    replica(catalog, "a", 4)
    with pytest.raises(FailoverError, match=f"sources found: {b.SOURCE_ID}"):
        failover(tmp_path, catalog, source_id="other")
    assert read_record(tmp_path) is None  # nothing fenced


def test_an_interrupted_failover_finishes_with_its_first_cut(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    replica(catalog, "a", 4)
    write_progress(tmp_path, {}, 4)
    first = failover(tmp_path, catalog)
    assert first.cut is not None
    # pretend promotion never ran: state back to pending with the cut taken
    from streamer.target.dr.failover import FailoverRecord, write_record

    write_record(tmp_path, FailoverRecord("pending", first.started, cut=first.cut))
    write_progress(tmp_path, {}, 40)  # a later consumed id must not move the recorded cut
    finished = failover(tmp_path, catalog)
    assert finished.state == "done" and finished.cut == first.cut


def test_a_database_left_mid_batch_out_of_order_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    """A fence left by a crash (or a halt) mid-batch: the tables may show a state the source never
    had, so no cut describes them; the pending record goes too, so a restarted job finishes the batch."""
    catalog = MemoryCatalog()
    replica(catalog, "a", 9)
    replica(catalog, "b", 5)
    fenced = dict(catalog.get_database("b").parameters)  # type: ignore[union-attr]
    fenced[FENCE_PARAM] = "6"
    catalog.alter_database("b", DatabaseSnapshot(name="b", parameters=fenced))
    write_progress(tmp_path, {}, 11)
    with pytest.raises(FailoverError, match=rf"database b carries {FENCE_PARAM}=6 .*restart the target job"):
        failover(tmp_path, catalog)
    assert read_record(tmp_path) is None  # the job is not fenced: it may run and finish the batch
    assert catalog.get_database("b").parameters == fenced  # type: ignore[union-attr]
    assert REPL_TARGET_PARAM in catalog.get_database("a").parameters  # type: ignore[union-attr]

    TargetState(tmp_path).halt("b", 7, "boom")
    with pytest.raises(FailoverError, match=r"halted\).*`streamer target retry --db b`\), then restart"):
        failover(tmp_path, catalog)

    del fenced[FENCE_PARAM]  # the batch's marker write removed it
    catalog.alter_database("b", DatabaseSnapshot(name="b", parameters=fenced))
    assert failover(tmp_path, catalog).state == "done"


def test_failover_waits_for_the_job_lock(tmp_path: Path) -> None:
    """A running job (another process holding the lock) keeps the failover from taking the cut."""
    catalog = MemoryCatalog()
    replica(catalog, "a", 2)
    with held_elsewhere(JobLock(tmp_path).held):
        with pytest.raises(JobRunningError):
            failover(tmp_path, catalog, wait_seconds=0.3)
        assert read_record(tmp_path).state == "pending"  # type: ignore[union-attr]  # job is fenced
        assert REPL_TARGET_PARAM in catalog.get_database("a").parameters  # type: ignore[union-attr]
    assert failover(tmp_path, catalog, wait_seconds=5).state == "done"


def test_a_failed_over_target_applies_nothing(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    settings = TargetSettings(
        source_id=b.SOURCE_ID,
        kafka=KafkaSettings(bootstrap_servers="unused:1", topic="t"),
        metastore=MetastoreSettings(uri="thrift://unused:1"),
        layout=LayoutSettings(warehouse_root=f"file://{tmp_path}/wh", state_dir=str(tmp_path / "state"),
                              checkpoint_dir=str(tmp_path / "ckpt")),
    )
    job = BatchApplier(settings, catalog)
    from streamer.events.codec import encode_event

    job.process([(0, encode_event(b.create_db(1, "a")))])
    params = catalog.get_database("a").parameters  # type: ignore[union-attr]
    assert params[REPL_TARGET_PARAM] == b.SOURCE_ID  # a replica is marked as one
    failover(settings.layout.state_dir, catalog)
    with pytest.raises(FailedOverError):
        job.process([(1, encode_event(b.create_db(2, "c")))])
    assert catalog.get_database("c") is None

    # even an applier with another state dir refuses to change a promoted database
    state = TargetState(tmp_path / "other")
    applier = Applier(catalog, FileCopier(), TargetPaths(f"file://{tmp_path}/wh"), b.SOURCE_ID, state=state)
    report = run_plan(applier, plan([b.alter_table(3, b.table("a", "t"), b.table("a", "t"))], {}), state)
    assert report.halted["a"].event_id == 3 and "failed over" in report.halted["a"].cause


def test_mark_readonly_sets_hives_readonly(tmp_path: Path) -> None:
    catalog = MemoryCatalog()
    state = TargetState(tmp_path)
    applier = Applier(catalog, FileCopier(), TargetPaths(f"file://{tmp_path}/wh"), b.SOURCE_ID, state=state,
                      mark_readonly=True)
    run_plan(applier, plan([b.create_db(1, "a", owner="x")], {}), state)
    params = catalog.get_database("a").parameters  # type: ignore[union-attr]
    assert params[READONLY_PARAM] == "true" and params["owner"] == "x"


def test_new_primary_head_is_read_after_the_job_stopped(tmp_path: Path) -> None:
    """The head is read under the job lock: a metastore that logs its changes has logged every
    change the job made there by then."""
    catalog = MemoryCatalog()
    replica(catalog, "a", 3)
    seen: list[bool] = []

    def head() -> int:
        other = JobLock(tmp_path)
        seen.append(other.acquire())  # False: the failover holds the lock while it reads
        other.release()
        return 42

    done = failover(tmp_path, catalog, new_primary_head=head)
    assert seen == [False] and done.cut is not None and done.cut.new_primary_event_id == 42


def test_a_replica_of_a_failed_over_primary_keeps_only_its_own_bookkeeping(tmp_path: Path) -> None:
    """The old source rebased as a target of the new primary: the primary's databases carry the
    forward stream's repl.last.id and failover record, which the replica must not take."""
    catalog = MemoryCatalog()
    applier = Applier(catalog, FileCopier(), TargetPaths(f"file://{tmp_path}/wh"), "new-primary",
                      state=TargetState(tmp_path / "state"))
    foreign = {LAST_ID_PARAM: "900", FAILOVER_CUT_PARAM: "900", "repl.failover.time": "t",
               REPL_SOURCE_PARAM: "old", REPL_TARGET_PARAM: "old", "owner.team": "fin"}
    report = run_plan(applier, plan([b.create_db(5, "a", **foreign)], {}), TargetState(tmp_path / "state"))
    assert not report.halted
    params = catalog.get_database("a").parameters  # type: ignore[union-attr]
    assert params == {LAST_ID_PARAM: "5", REPL_SOURCE_PARAM: "new-primary", REPL_TARGET_PARAM: "new-primary",
                      "owner.team": "fin"}
