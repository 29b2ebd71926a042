"""Fixtures of the ACID end-to-end tests: a source with its agent and a target job as a child process.

One pipeline serves the module (``shared_pipeline``), the deployed one: bundled warehouse -> SQL
reader -> agent (a thread) -> Tansu topic -> ``streamer target run`` (its own process, so its
``/metrics`` counters are this pipeline's alone and a test can SIGKILL it) -> target metastore (the
session's ``hms``) and files. Tests read the replica with the session's in-process Spark through
``streamer.target.read_table``.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.topics import ensure_topic
from streamer.target import read_table
from streamer.target.apply.plan import GLOBAL_DB
from streamer.target.state.state_file import TargetState
from streamer.target.state.visibility import VisibilitySnapshot
from tests.integration.target.helpers import Source, TargetError, TargetProcess, TargetStack

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Pipeline:
    """One source (warehouse + publishing agent) replicated by one target job."""

    source: Source
    stack: TargetStack
    job: TargetProcess

    @property
    def warehouse_root(self) -> str:
        return str(self.stack.warehouse_root)

    def applied(self) -> dict[str, int]:
        """Last applied event id per source database and for ``GLOBAL_DB`` (the txn events)."""
        expected = self.expected()
        out = self.stack.applied_ids([db for db in expected if db != GLOBAL_DB])
        out[GLOBAL_DB] = TargetState(self.stack.state_dir).applied().get(GLOBAL_DB, 0)
        return out

    def expected(self) -> dict[str, int]:
        """The source's newest event id per database and of the database-less (transaction) events."""
        out = self.source.last_ids()
        txn_events = [r.event_id for r in self.source.warehouse.notifications() if not r.db_name]
        if txn_events:
            out[GLOBAL_DB] = max(txn_events)
        return out

    def wait_converged(self, timeout: float = 180.0) -> None:
        """Until the job serves metrics and applied every source event; fails on a halt or a dead job."""

        def done() -> bool:
            halts = self.stack.halts()
            if halts:
                raise TargetError(f"target halted: {halts}")
            if self.source.errors:
                raise TargetError(f"source agent failed: {self.source.errors[0]!r}")
            try:
                self.job.metric("streamer_target_bytes_copied_total")
            except OSError:
                return False  # the job does not serve /metrics yet
            expected = self.expected()
            applied = self.applied()
            return all(applied.get(db, 0) >= last for db, last in expected.items())

        self.job.wait_for(done, "every source event applied", timeout)

    def counter(self, name: str) -> float:
        """A counter of the running job's ``/metrics`` (reset when the job restarts)."""
        return self.job.metric(name)

    def target_rows(
        self, spark: SparkSession, db: str, table: str, visibility: VisibilitySnapshot | None = None
    ) -> list[dict[str, Any]]:
        frame = read_table(spark, f"{db}.{table}", warehouse_root=self.warehouse_root,
                           hms_uri=self.stack.hms.uri, visibility=visibility)
        return [r.asDict() for r in frame.collect()]


def multiset(rows: list[dict[str, Any]]) -> Counter[str]:
    """Rows as a multiset of canonical JSON (duplicates count, column order does not)."""
    return Counter(json.dumps(r, sort_keys=True, default=str) for r in rows)


def _open_pipeline(work: Path, broker: EmbeddedBroker, hms: EmbeddedMetastore, name: str) -> Pipeline:
    topic = f"acid-{name}-{uuid.uuid4().hex[:8]}"
    ensure_topic(broker.client_settings(), topic)
    source = Source.open(work / "source", broker.client_settings(), topic, f"src-{name}")
    stack = TargetStack(hms, work / "target")
    return Pipeline(source, stack, TargetProcess(stack, broker.bootstrap_servers, source))


@pytest.fixture(scope="module")
def shared_pipeline(
    broker: EmbeddedBroker, hms: EmbeddedMetastore, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pipeline]:
    """One running source -> target pipeline for the module (a target job costs a JVM start).

    Tests on it use their own databases and measure counters as differences over their own work;
    one test kills and restarts the job.
    """
    pipeline = _open_pipeline(tmp_path_factory.mktemp("acid-shared"), broker, hms, "shared")
    try:
        pipeline.source.start_background()
        pipeline.job.start()
        yield pipeline
    finally:
        pipeline.job.stop()
        pipeline.source.close()


@pytest.fixture
def prefix() -> str:
    """A unique database-name prefix (the session metastore is shared with other tests)."""
    return f"acid{uuid.uuid4().hex[:6]}_"
