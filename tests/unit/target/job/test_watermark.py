"""The published watermark: its computation (quiet databases are consistent up to what the job
consumed, a halt pins its database and the global id), its metastore record, and the publisher's
one metastore call per micro-batch."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamer import metrics
from streamer.errors import StreamerError
from streamer.events.model import DatabaseSnapshot
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.plan import GLOBAL_DB
from streamer.target.job.watermark import (
    EVENT_ID_PARAM,
    RECHECK_SECONDS,
    Watermark,
    WatermarkPublisher,
    compute,
    default_watermark_db,
    from_parameters,
    to_parameters,
)


def test_quiet_databases_are_consistent_up_to_the_newest_consumed_event() -> None:
    mark = compute({"sales": 10, "hr": 40, GLOBAL_DB: 38}, consumed_event_id=45, stuck=())
    assert mark == Watermark(45, {"sales": 45, "hr": 45})


def test_a_halted_database_pins_its_own_and_the_global_watermark() -> None:
    mark = compute({"sales": 10, "hr": 40}, consumed_event_id=45, stuck={"sales"})
    assert mark.event_id == 10
    assert mark.databases == {"sales": 10, "hr": 45}
    assert mark.halted == frozenset({"sales"})


def test_per_database_ids_are_of_target_names() -> None:
    mark = compute({"sales": 10}, 12, (), target_db={"sales": "Sales_DR"}.get)  # type: ignore[arg-type]
    assert mark.databases == {"sales_dr": 12}


def test_nothing_replicated_yet_means_the_consumed_id() -> None:
    assert compute({}, 7, ()).event_id == 7


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 1000)),
    st.integers(0, 1000),
    st.sets(st.sampled_from("abcdef")),
)
def test_watermark_is_never_ahead_of_a_database_and_never_behind_its_applied_id(
    applied: dict[str, int], consumed: int, stuck: set[str]
) -> None:
    mark = compute(applied, consumed, stuck)
    assert all(mark.event_id <= i for i in mark.databases.values())
    for db, i in applied.items():
        assert mark.databases[db] >= i
        assert mark.databases[db] == (i if db in stuck else max(i, consumed))
    assert from_parameters(to_parameters(mark)) == mark


def test_a_record_without_the_watermark_is_none_and_a_foreign_value_is_named() -> None:
    assert from_parameters({"comment": "x"}) is None
    try:
        from_parameters({EVENT_ID_PARAM: "soon"})
    except ValueError as exc:
        assert EVENT_ID_PARAM in str(exc) and "soon" in str(exc)
    else:
        raise AssertionError("a non-numeric watermark was accepted")


def test_default_database_name_is_a_valid_hive_name() -> None:
    assert default_watermark_db("Prod-EU.1") == "streamer_watermark_prod_eu_1"


def _publisher(catalog: MemoryCatalog, clock: list[float]) -> WatermarkPublisher:
    return WatermarkPublisher(catalog, "streamer_watermark_src", "file:/wh/streamer_watermark_src.db", "src",
                              clock=lambda: clock[0])


def test_publisher_writes_once_per_batch_and_not_when_nothing_moved() -> None:
    catalog, clock = MemoryCatalog(), [100.0]
    publisher = _publisher(catalog, clock)
    publisher.publish(Watermark(5, {"sales": 5}))
    assert catalog.calls == ["create_database"]
    publisher.publish(Watermark(5, {"sales": 5}))
    assert catalog.calls == ["create_database"]
    clock[0] = 101.0
    publisher.publish(Watermark(9, {"sales": 9, "hr": 9}))
    assert catalog.calls == ["create_database", "alter_database"]
    stored = from_parameters(catalog.databases["streamer_watermark_src"].parameters)
    assert stored == Watermark(9, {"sales": 9, "hr": 9}, source_id="src", time=101.0)
    assert metrics.TARGET_WATERMARK._value.get() == 9
    assert metrics.TARGET_DB_WATERMARK.labels(db="hr")._value.get() == 9


def test_publisher_keeps_foreign_parameters_and_drops_databases_that_left() -> None:
    catalog, clock = MemoryCatalog(), [1.0]
    catalog.create_database(DatabaseSnapshot("streamer_watermark_src", parameters={"owner.note": "ops"}))
    publisher = _publisher(catalog, clock)
    publisher.publish(Watermark(3, {"a": 3, "b": 3}))
    publisher.publish(Watermark(4, {"a": 4}))
    params = catalog.databases["streamer_watermark_src"].parameters
    assert params["owner.note"] == "ops"
    assert from_parameters(params) == Watermark(4, {"a": 4}, source_id="src", time=1.0)


def test_publisher_refuses_a_replicated_database() -> None:
    catalog = MemoryCatalog()
    catalog.create_database(DatabaseSnapshot("streamer_watermark_src", parameters={REPL_SOURCE_PARAM: "src"}))
    try:
        _publisher(catalog, [0.0]).prepare()
    except Exception as exc:
        assert "replicated database" in str(exc) and "--watermark-db" in str(exc)
    else:
        raise AssertionError("the publisher overwrote a replicated database")


class _Failing(MemoryCatalog):
    fail = True

    def alter_database(self, name: str, db: DatabaseSnapshot, *, exists: bool = False) -> None:
        if self.fail:
            raise ConnectionError("metastore away")
        super().alter_database(name, db, exists=exists)


def test_a_failed_write_is_retried_with_the_next_batch() -> None:
    catalog = _Failing()
    publisher = _publisher(catalog, [0.0])
    publisher.publish(Watermark(1, {"a": 1}))  # created
    publisher.publish(Watermark(2, {"a": 2}))  # fails: logged, not raised
    assert from_parameters(catalog.databases["streamer_watermark_src"].parameters).event_id == 1  # type: ignore[union-attr]
    catalog.fail = False
    publisher.publish(Watermark(2, {"a": 2}))  # the same ids again: written this time
    assert from_parameters(catalog.databases["streamer_watermark_src"].parameters).event_id == 2  # type: ignore[union-attr]


def test_metrics_only_when_no_database_is_named() -> None:
    catalog = MemoryCatalog()
    WatermarkPublisher(catalog, None, "", "src").publish(Watermark(8, {"a": 8}))
    assert catalog.calls == []
    assert metrics.TARGET_WATERMARK._value.get() == 8


def test_a_halt_that_cannot_be_published_stops_the_batch() -> None:
    catalog = _Failing()
    naps: list[float] = []
    publisher = WatermarkPublisher(catalog, "streamer_watermark_src", "", "src", sleep=naps.append)
    publisher.publish(Watermark(1, {"a": 1, "b": 1}))
    try:
        publisher.publish(Watermark(1, {"a": 1, "b": 1}, frozenset({"a"})), required=True)
    except StreamerError as exc:
        assert "halted databases ['a']" in str(exc) and "metastore away" in str(exc)
    else:
        raise AssertionError("an unpublished halt let the batch go on")
    assert naps == [1.0, 1.0]


class _Hive23(MemoryCatalog):
    """Like a Hive 2.3 metastore: an alter of a missing database is ignored, unless the caller asks
    for the existence read (``exists=False``, one call more), which then refuses it."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def alter_database(self, name: str, db: DatabaseSnapshot, *, exists: bool = False) -> None:
        if not exists:
            self.reads += 1
            if name.lower() not in self.databases:
                raise ConnectionError(f"{name} does not exist")
        if name.lower() in self.databases:
            super().alter_database(name, db, exists=exists)


def test_writes_skip_the_existence_read_for_a_while_and_a_dropped_database_comes_back() -> None:
    catalog, clock = _Hive23(), [0.0]
    publisher = _publisher(catalog, clock)
    publisher.prepare()  # absent: created by the first write
    for i in range(1, 6):
        clock[0] = float(i)
        publisher.publish(Watermark(i, {"a": i}))
    assert catalog.reads == 0  # created, then altered four times: one call each
    catalog.databases.pop("streamer_watermark_src")  # an operator drops it
    clock[0] = 5.0 + RECHECK_SECONDS
    publisher.publish(Watermark(6, {"a": 6}))  # read first: missing, so not written (logged)
    assert catalog.reads == 1 and "streamer_watermark_src" not in catalog.databases
    clock[0] += 1
    publisher.publish(Watermark(7, {"a": 7}))  # the next batch creates it again
    stored = from_parameters(catalog.databases["streamer_watermark_src"].parameters)
    assert stored is not None and stored.event_id == 7
