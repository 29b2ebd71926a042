"""A real writer for the writer tests: Spark SQL with Hive support (Hive 2.3's own client code) in a
child process, writing through a source metastore and answering one JSON request per line.

Spark uses Hive's write path (``Hive.loadTable`` / ``loadPartition`` / ``loadDynamicPartitions``, which
fire INSERT events with ``hive.metastore.dml.events``) only with the metastore-format conversions off:
with ``spark.sql.hive.convertMetastoreParquet/Orc=true`` (Spark's default) it writes Parquet and ORC
Hive tables with its own datasource writer, which fires no INSERT at all.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from streamer.embedded_metastore.cm import CHECKSUM_KEY
from streamer.embedded_metastore.launch import local_fs_classes, pyspark_jars_dir
from streamer.embedded_metastore.localfs import FS_CLASS
from tests.fixtures.spark_child import SparkChild

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    uri, warehouse, classes, fs, checksum_key = sys.argv[1:6]
    builder = SparkSession.builder
    if classes:  # streamer's local filesystem: MD5 checksums, recorded in INSERT events as on HDFS
        builder = (builder.config("spark.driver.extraClassPath", classes)
                   .config("spark.hadoop.fs.file.impl", fs).config("spark.hadoop." + checksum_key, "MD5"))
    spark = (
        builder.master("local[1]").appName("streamer-test-writer")
        .enableHiveSupport()
        .config("hive.metastore.uris", uri)
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.hadoop.hive.metastore.dml.events", "true")
        .config("spark.sql.hive.convertMetastoreParquet", "false")
        .config("spark.sql.hive.convertMetastoreOrc", "false")
        .config("spark.hadoop.hive.exec.dynamic.partition.mode", "nonstrict")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print("READY", flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            rows = spark.sql(req["sql"]).collect()
            out = {"ok": [r.asDict() for r in rows]}
        except Exception as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        print("RESULT " + json.dumps(out, default=str), flush=True)
    spark.stop()
    """
)


class WriterError(AssertionError):
    """The writer failed a statement or died; the message carries the evidence."""


class SparkWriter:
    """``sql(statement)`` runs one statement in the writer's Spark session and returns its rows."""

    def __init__(self, hms_uri: str, warehouse: Path, log_path: Path, *, checksums: bool = False) -> None:
        """``checksums``: write through streamer's local filesystem, whose files have MD5 checksums,
        so the INSERT events carry them (``uri#checksum``) as a writer's on HDFS do."""
        classes = local_fs_classes(pyspark_jars_dir(), required_by="checksums") if checksums else ""
        self._child = SparkChild(_SCRIPT, [hms_uri, str(warehouse), str(classes), FS_CLASS, CHECKSUM_KEY],
                                 log_path, what="Spark writer", error=WriterError)

    def wait_ready(self) -> None:
        self._child.wait_ready()

    def sql(self, statement: str) -> list[dict[str, Any]]:
        out = self._child.ask(sql=statement)
        if "error" in out:
            raise WriterError(f"{statement}: {out['error']}")
        rows: list[dict[str, Any]] = out["ok"]
        return rows

    def close(self) -> None:
        self._child.close()
