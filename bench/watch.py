"""The source agent's cost of watching tables whose writers log nothing (``streamer.source.watch``).

An embedded Hive metastore (Derby) holds ``--tables`` Spark datasource tables (``USING parquet``):
half unpartitioned, half with ``--partitions`` partitions each; every directory holds ``--files``
files of ``--file-kb`` KB on the local disk. A ``Watcher`` over the metastore's Thrift API
(``HmsWatchCatalog``, what ``source run --hms-uri`` uses) then runs the cycles the agent runs, without
Kafka (records are encoded, not sent):

- ``first``: what a start costs: the tables read from the metastore, every directory listed, every
  file checksummed, every directory encoded as a replace;
- ``idle``: a cycle where nothing changed (the cost paid every ``--watch-seconds``), median of
  ``--repeats``;
- ``one_change``: one file added to one partition: listed, one file read, one record;
- ``event``: the log named one partitioned table (as a new partition's ADD_PARTITION would): its
  table and partitions read again, then an idle cycle.

Each reports seconds, metastore round trips (``streamer.metastore.thrift.CALLS``) and bytes
checksummed; per watched table and per watched directory (unpartitioned table or partition).
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.append(sys.path.pop(0))  # so that bench/copy.py cannot shadow the standard library's copy

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from common import emit, quiet_logs, say


def _tables(root: Path, tables: int, partitions: int, files: int, file_kb: int) -> list[Any]:
    from streamer.events.model import Column, PartitionSnapshot, SerDe, StorageDescriptor, TableSnapshot

    out = []
    payload = os.urandom(file_kb * 1024)
    serde = SerDe(serialization_lib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")
    for i in range(tables):
        location = root / "bench.db" / f"t{i}"
        keys = [Column("dt", "string")] if i % 2 else []
        table = TableSnapshot(f"t{i}", "bench", "MANAGED_TABLE",
                              StorageDescriptor(location=location.as_uri(), serde=serde,
                                                columns=[Column("id", "bigint")]),
                              keys, {"spark.sql.sources.provider": "parquet"})
        dirs = [location] if not keys else [location / f"dt={p}" for p in range(partitions)]
        parts = [PartitionSnapshot([str(p)], sd=StorageDescriptor(location=f"file://{d}", serde=serde))
                 for p, d in enumerate(dirs)] if keys else []
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            for f in range(files):
                (d / f"part-{f:05d}.parquet").write_bytes(payload + f.to_bytes(4, "big"))
        out.append((table, parts))
    return out


def _cycle(watcher: Any) -> dict[str, Any]:
    from streamer.events.codec import EventSerializer
    from streamer.metastore.thrift import CALLS
    from streamer.source.enrich import FsspecInspector

    read: list[int] = []

    class Counting(FsspecInspector):
        def sha256(self, uri: str) -> str | None:
            done = super().sha256(uri)
            size = self.size(uri)
            read.append(size or 0)
            return done

    watcher.files = Counting()
    serializer = EventSerializer()
    CALLS.reset()
    started = time.perf_counter()
    changes = watcher.scan()
    events, ready = watcher.events(changes, source_id="bench", after=1, now=time.time())
    encoded = sum(len(serializer(e, None)) for e in events)
    watcher.commit(ready)
    return {"seconds": time.perf_counter() - started, "metastore_calls": CALLS.reset(),
            "records": len(events), "record_bytes": encoded, "files_read": len(read), "bytes_read": sum(read)}


def run(work: Path, *, tables: int, partitions: int, files: int, file_kb: int,
        repeats: int) -> dict[str, Any]:
    from streamer.embedded_metastore.server import EmbeddedMetastore
    from streamer.events.model import DatabaseSnapshot
    from streamer.hive.notification import NotificationRow
    from streamer.metastore.thrift import HmsCatalog
    from streamer.source.enrich import EnrichSettings
    from streamer.source.policy import PolicySet
    from streamer.source.watch import HmsWatchCatalog, Watcher

    root = work / "warehouse"
    say("starting the metastore")
    with EmbeddedMetastore(work_dir=work / "hms", warehouse_dir=root) as hms, HmsCatalog(hms.uri) as catalog:
        catalog.create_database(DatabaseSnapshot("bench", location=(root / "bench.db").as_uri()))
        say(f"creating {tables} tables")
        made = _tables(root, tables, partitions, files, file_kb)
        for table, parts in made:
            catalog.create_table(table)
            if parts:
                catalog.add_partitions("bench", table.name, parts)
        watcher = Watcher(HmsWatchCatalog(hms.uri), PolicySet.parse(["bench"]), EnrichSettings())
        try:
            first = _cycle(watcher)
            dirs = len(watcher.dirs())
            idle_runs = [_cycle(watcher) for _ in range(repeats)]
            partitioned = next(t for t, p in made if p)
            target = Path(partitioned.sd.location.removeprefix("file://")) / "dt=0" / "new.parquet"
            target.write_bytes(os.urandom(file_kb * 1024))
            one = _cycle(watcher)
            watcher.note([NotificationRow(2, 0, "ADD_PARTITION", "{}", db_name="bench",
                                          table_name=partitioned.name)])
            event = _cycle(watcher)
        finally:
            watcher.close()
    idle = min(idle_runs, key=lambda r: r["seconds"]) | {
        "seconds": statistics.median(r["seconds"] for r in idle_runs)}
    per = {name: {**r, "seconds_per_table": r["seconds"] / tables, "seconds_per_dir": r["seconds"] / dirs,
                  "metastore_calls_per_table": r["metastore_calls"] / tables}
           for name, r in (("first", first), ("idle", idle), ("one_change", one), ("event", event))}
    return {"tables": tables, "partitioned_tables": sum(1 for _, p in made if p), "dirs": dirs,
            "files_per_dir": files, "file_kb": file_kb, **per}


@click.command()
@click.option("--tables", default=40, show_default=True, help="Watched tables (half partitioned).")
@click.option("--partitions", default=20, show_default=True, help="Partitions of each partitioned table.")
@click.option("--files", default=4, show_default=True, help="Files per directory.")
@click.option("--file-kb", default=64, show_default=True, help="Size of each file (KB).")
@click.option("--repeats", default=5, show_default=True, help="Idle cycles (their median is reported).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of a table.")
def main(tables: int, partitions: int, files: int, file_kb: int, repeats: int, as_json: bool) -> None:
    """The agent's cost per watched table and partition: first cycle, idle cycle, one change."""
    quiet_logs()
    with tempfile.TemporaryDirectory(prefix="streamer-bench-watch-") as tmp:
        result = run(Path(tmp), tables=tables, partitions=partitions, files=files, file_kb=file_kb,
                     repeats=repeats)
    emit("watch: the agent's cost per watched table and directory", result, as_json)


if __name__ == "__main__":
    main()
