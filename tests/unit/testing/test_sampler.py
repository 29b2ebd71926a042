"""The sampler on an in-memory target: samples taken, metastore failures counted apart from bugs."""

from __future__ import annotations

import time

from streamer.events.model import DatabaseSnapshot
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.metastore.thrift import CatalogError
from streamer.testing.sampler import Sampler, TargetReader
from tests.unit.target import builders as b


class Flaky(MemoryCatalog):
    """Fails every third table read, as a metastore failing a query under concurrent DDL does."""

    def __init__(self, base: MemoryCatalog) -> None:
        self.__dict__.update(base.__dict__)
        self.reads = 0

    def get_table(self, db: str, name: str):  # type: ignore[no-untyped-def]
        self.reads += 1
        if self.reads % 3 == 1:
            raise CatalogError("MetaException: Exception thrown when executing query", obj=f"{db}.{name}")
        return super().get_table(db, name)


def _target() -> MemoryCatalog:
    catalog = MemoryCatalog()
    catalog.create_database(DatabaseSnapshot(name="a", parameters={LAST_ID_PARAM: "2"}))
    catalog.create_table(b.table("a", "t", location="/nowhere/a.db/t"))
    return catalog


def _run(sampler: Sampler) -> list[object]:
    sampler.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(sampler.samples) < 3:
        time.sleep(0.05)
    return list(sampler.stop())


def test_failed_metastore_reads_are_counted_as_read_failures_not_sampler_errors() -> None:
    base = _target()
    sampler = Sampler(lambda: Flaky(base), lambda: ["a"], readers=1, interval=0.01)
    samples = _run(sampler)
    assert samples, "the reads that succeeded still make samples"
    assert sampler.read_failures and "MetaException" in sampler.read_failures[0]
    assert not sampler.errors


def test_a_sampler_bug_is_an_error() -> None:
    class Broken(MemoryCatalog):
        def get_database(self, name: str) -> DatabaseSnapshot | None:
            raise KeyError("a bug, not a metastore failure")

    sampler = Sampler(lambda: Broken(), lambda: ["a"], readers=1, interval=0.01)
    sampler.start()
    time.sleep(0.3)
    sampler.stop()
    assert sampler.errors and "KeyError" in sampler.errors[0]
    assert not sampler.read_failures


def test_a_sample_of_a_database_applied_out_of_order_is_discarded() -> None:
    """A fenced database's tables may show a state the source never had: discarded, never judged."""
    catalog = _target()
    reader = TargetReader("r", catalog, lambda: ["a"])
    assert reader.sample() is not None and reader.discarded == 0
    catalog.alter_database("a", DatabaseSnapshot(name="a", parameters={LAST_ID_PARAM: "2", FENCE_PARAM: "3"}))
    assert reader.sample() is None
    assert (reader.taken, reader.discarded) == (1, 1)


def test_a_fence_set_during_a_sample_discards_it() -> None:
    """The fence is in the second reading only (a batch began meanwhile; repl.last.id has not moved)."""

    class Fencing(MemoryCatalog):
        def __init__(self, base: MemoryCatalog) -> None:
            self.__dict__.update(base.__dict__)

        def get_table(self, db: str, name: str):  # type: ignore[no-untyped-def]
            params = {LAST_ID_PARAM: "2", FENCE_PARAM: "3"}
            self.alter_database(db, DatabaseSnapshot(name=db, parameters=params))
            return super().get_table(db, name)

    reader = TargetReader("r", Fencing(_target()), lambda: ["a"])
    assert reader.sample() is None
    assert (reader.taken, reader.discarded) == (0, 1)
