"""Bootstrap of a transactional table over Thrift (``streamer bootstrap --hms-uri``), checked against
Hive's own reader.

The source is the embedded Hive 2.3 metastore on PostgreSQL, with Hive's transaction tables. The test
plays Hive's writer: it opens transactions through Thrift, writes their ``delta_T_T_S`` directories
(and a major compaction's ``base_T`` next to the deltas it replaced), commits one, aborts one and
leaves one open around the dump. A bootstrap with a short ``--open-txn-timeout`` fails naming the
open transaction; with ``--abort-open-txns`` it aborts it and publishes the table with exactly the
directories Hive's ``AcidUtils.getAcidState`` chooses for the same ``get_open_txns`` answer (Hive's
classes run in a JVM from PySpark's jars, through py4j): never an open or aborted transaction's.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamer.events.codec import EventDeserializer
from streamer.events.model import (
    BootstrapObjectPayload,
    Column,
    Event,
    SerDe,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.kafka.broker import EmbeddedBroker
from streamer.kafka.topics import read_tail
from streamer.metastore.thrift import ThriftTxns
from streamer.source.hms_source_catalog import HmsSourceCatalog
from streamer.source.open_txns import OpenTxnPolicy
from streamer.warehouse.acid import parse_dir
from tests.integration.bootstrap.test_bootstrap_hms import COLUMNS, HiveSource, _local, hive, write_parquet
from tests.integration.target.helpers import STREAMER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

__all__ = ["hive"]  # the fixture, imported for pytest


@pytest.fixture(scope="module")
def hive_jvm() -> Iterator[Any]:
    """A JVM with PySpark's jars (Hive 2.3's hive-common first: its ValidReadTxnList is the one
    Hive 2.3's AcidUtils was built against), reached through py4j."""
    import pyspark
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

    jars = Path(pyspark.__file__).parent / "jars"
    common = next(jars.glob("hive-common-2.*.jar"))
    port = launch_gateway(classpath=f"{common}:{jars}/*", die_on_exit=True)
    gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
    try:
        yield gateway
    finally:
        gateway.shutdown()


def hive_choice(gateway: Any, location: str, hms: HiveSource) -> list[str]:
    """The directories Hive 2.3's reader reads under ``location`` for the metastore's current
    ``get_open_txns`` (as a Hive query builds its ValidReadTxnList from it)."""
    got = hms.catalog.conn.call("txns", lambda c: c.get_open_txns())
    exceptions = sorted(int(t) for t in (got.open_txns or ()))
    jvm = gateway.jvm
    array = gateway.new_array(jvm.long, len(exceptions))
    for i, t in enumerate(exceptions):
        array[i] = t
    min_open = int(got.min_open_txn) if got.min_open_txn is not None else 2**63 - 1
    valid = jvm.org.apache.hadoop.hive.common.ValidReadTxnList(array, int(got.txn_high_water_mark), min_open)
    conf = jvm.org.apache.hadoop.conf.Configuration()
    path = jvm.org.apache.hadoop.fs.Path(location)
    state = jvm.org.apache.hadoop.hive.ql.io.AcidUtils.getAcidState(path, conf, valid)
    out = []
    if state.getBaseDirectory() is not None:
        out.append(state.getBaseDirectory().getName())
    out += [d.getPath().getName() for d in state.getCurrentDirectories()]
    return out


def _create_acid_table(
    hive: HiveSource, db: str, name: str, keys: list[Column] | None = None
) -> TableSnapshot:
    """A transactional table as Hive 2.3 accepts one: ORC, bucketed. The test's data files are
    Parquet all the same (what targets read); the dump and Hive's directory choice never open them."""
    sd = StorageDescriptor(
        location=hive.location(f"{db}.db", name), columns=COLUMNS, num_buckets=1, bucket_columns=["id"],
        input_format="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        output_format="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serde=SerDe(serialization_lib="org.apache.hadoop.hive.ql.io.orc.OrcSerde"),
    )
    hive.catalog.create_table(
        TableSnapshot(name, db, sd=sd, partition_keys=keys or [], parameters={"transactional": "true"})
    )
    table = hive.catalog.get_table(db, name)
    assert table is not None and table.is_transactional
    return table


def _deltas(location: str, txn: int, statements: int, first: int) -> None:
    for s in range(statements):
        write_parquet(f"{location}/delta_{txn:07d}_{txn:07d}_{s:04d}", "bucket_00000", first + 10 * s)


def _bootstrap(broker: EmbeddedBroker, hive: HiveSource, topic: str, prefix: str, *flags: str
               ) -> subprocess.CompletedProcess[str]:
    cmd = [STREAMER, "bootstrap", "--source-id", hive.source_id, "--hms-uri", hive.hms.uri, "--policy",
           f"`{prefix}.*`", "--bootstrap-servers", broker.bootstrap_servers, "--topic", topic, *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _dumped_dirs(broker: EmbeddedBroker, topic: str, location: str) -> tuple[list[str], list[int]]:
    """First-level directories of the table's dumped files, and its dumped write ids."""
    deserialize = EventDeserializer()
    events: list[Event] = [deserialize(r.value) for r in read_tail(broker.client_settings(), topic, n=10_000)
                           if r.value]
    tables = [e.payload for e in events if isinstance(e.payload, BootstrapObjectPayload)
              and e.payload.table is not None and e.payload.table.name == "events"]
    assert tables, [e.event_type for e in events]
    base = str(_local(location)) + "/"
    dirs = {str(_local(f.uri))[len(base):].split("/")[0] for p in tables for f in p.files}
    ids = sorted({w for p in tables for w in p.write_ids})
    return sorted(dirs), ids


def test_acid_table_over_thrift_dumps_what_hives_reader_reads(
    broker: EmbeddedBroker, hive: HiveSource, topic: str, prefix: str, hive_jvm: Any
) -> None:
    db = f"{prefix}acid"
    hive.create_database(db)
    table = _create_acid_table(hive, db, "events")
    location = table.sd.location
    assert location
    txns = ThriftTxns(hive.catalog.conn)
    t1, t2, t3, t4, t5, t6 = txns.open(6, user="hive")
    _deltas(location, t1, 1, 0)
    _deltas(location, t2, 1, 100)
    txns.commit(t1)
    txns.commit(t2)
    write_parquet(f"{location}/base_{t2:07d}", "bucket_00000", 0, rows=6)  # major compaction; not cleaned
    _deltas(location, t3, 1, 300)
    _deltas(location, t4, 1, 400)
    _deltas(location, t5, 1, 500)
    _deltas(location, t6, 2, 600)  # two statements of one transaction
    txns.commit(t3)
    txns.abort([t4])
    txns.commit(t6)  # t5 stays open around the dump

    refused = _bootstrap(broker, hive, topic, prefix, "--open-txn-timeout", "2")
    assert refused.returncode != 0, refused.stdout
    assert f"transactions {t5} of the source metastore were still open" in refused.stderr, \
        refused.stderr[-3000:]
    assert "--abort-open-txns" in refused.stderr

    done = _bootstrap(broker, hive, topic, prefix, "--open-txn-timeout", "1", "--abort-open-txns")
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"aborting transactions {t5}" in done.stderr, done.stderr[-3000:]
    after = txns.snapshot()
    assert t5 in after.aborted and not after.open

    hive_dirs = hive_choice(hive_jvm, location, hive)
    readable = [  # Hive's choice less the deltas its reader filters to nothing row by row
        d for d in hive_dirs if (p := parse_dir(d)) is not None
        and (p.kind == "base" or any(after.valid(t) for t in range(p.min_write_id, p.max_write_id + 1)))
    ]
    dirs, ids = _dumped_dirs(broker, topic, location)
    assert dirs == sorted(readable), (dirs, hive_dirs)
    assert dirs == sorted([f"base_{t2:07d}", f"delta_{t3:07d}_{t3:07d}_0000", f"delta_{t6:07d}_{t6:07d}_0000",
                           f"delta_{t6:07d}_{t6:07d}_0001"])
    assert ids == [t2, t3, t6]

    # a dump that waits: the open transaction commits while it waits, and is in it
    t7 = txns.open(1)[0]
    _deltas(location, t7, 1, 700)
    source = HmsSourceCatalog.connect(hive.hms.uri, open_txns=OpenTxnPolicy(timeout_s=60, poll_s=0.2))
    threading.Timer(1.5, txns.commit, [t7]).start()
    try:
        files = source.files(db, "events")
        waited_ids = source.write_ids(db, "events")
    finally:
        source.close()
    assert t7 in waited_ids
    got = sorted({str(_local(f.uri)).split("/")[-2] for f in files})
    assert got == sorted(hive_choice(hive_jvm, location, hive)), got
