"""A real writer: Spark SQL with Hive support writing Hive tables through a source metastore that logs
its changes, replicated by the agent (``--hms-uri``, in-process) and ``streamer target run``
(``scenario.py``).

Spark's Hive client is Hive 2.3's: ``InsertEventRequestData`` has no ``replace`` and an overwrite
(``Hive.replaceFiles``) hands ``fireInsertEvent`` no file list, so every INSERT OVERWRITE (a table, a
static partition, each partition of a dynamic-partition overwrite) is logged as an INSERT without
files. The agent resolves those into a listing of the object's directory, published as a replace
(``streamer.source.insert_files``); before it did, the replica kept the old rows.

Writes that log no INSERT (a datasource table ``USING parquet``, partitioned and not; a Hive Parquet
table written with Spark's default conversion) reach the replica by its directory sync, and the
replica's locations (``sd.location``, the serde's ``path``) are its own, never the source's.

Paced: after each statement the agent publishes and the test waits for the target to apply it, then
compares the table on both sides (rows from the target's files, partitions, files, no halt). Two
overwrites are published only after a later statement renamed their table or dropped their partition.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import EventType, InsertPayload
from streamer.kafka.broker import EmbeddedBroker
from tests.integration.writers.scenario import FINAL_TABLES, by_state_statements, run

BY_STATE_STEPS = len(list(by_state_statements("db")))
pytestmark = [pytest.mark.integration, pytest.mark.ci, pytest.mark.timeout(900)]  # the CI tier


def test_spark_sql_writes_replicate_overwrites_included(
    broker: EmbeddedBroker, hms_notifying: EmbeddedMetastore, hms: EmbeddedMetastore, tmp_path: Path,
) -> None:
    began = time.monotonic()
    outcome = run(broker.client_settings(), broker.bootstrap_servers, hms_notifying, hms, tmp_path)
    file_less = [(e, t) for e, t, with_files in outcome.inserts if not with_files]
    by_state_seconds = sum(outcome.seconds[-BY_STATE_STEPS:])
    print(f"\n{len(outcome.inserts)} INSERT events, file-less: {file_less}; steps {len(outcome.seconds)} "
          f"in {sum(outcome.seconds):.0f} s (replicated by state: {by_state_seconds:.0f} s), "
          f"test {time.monotonic() - began:.0f} s")
    assert not outcome.diverged and set(outcome.tables) == set(FINAL_TABLES)
    # every overwrite came file-less: per format one of a table, two of a static partition (one with
    # no rows), two of a dynamic-partition overwrite; then one renamed, one dropped before publishing
    assert len(file_less) == 2 * 5 + 2, outcome.inserts
    for event_id, _ in file_less[:-1]:  # the last one's partition was dropped: published as it came
        payload = outcome.published[event_id]
        assert isinstance(payload, InsertPayload) and payload.replace, payload
        assert payload.table is not None and all(f.checksum for f in payload.files), payload
    dropped = outcome.published[file_less[-1][0]]
    assert isinstance(dropped, InsertPayload) and not dropped.replace and not dropped.files
    # one statement dropping two partitions came as two events in a row (which a target's plan merges
    # into one step: tests/unit/target/apply/test_plan.py), and
    # the INSERT into one of them, read by the agent after the drop, carries its table to read it by
    drops = [e.event_id for e in outcome.events
             if e.event_type is EventType.DROP_PARTITION and (e.table or "").lower() == "p_textfile"]
    assert len(drops) == 3 and drops[2] == drops[1] + 1, drops
    into_dropped = [p for p in outcome.published.values()
                    if isinstance(p, InsertPayload) and p.partition_values == ["7"]]
    assert into_dropped and all(p.table is not None and p.files for p in into_dropped), into_dropped
    # replicated by state: the datasource tables, the converted one, and the Parquet tables Spark made
    assert outcome.by_state == 5, outcome.by_state
