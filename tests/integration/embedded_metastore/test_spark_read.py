"""Users read the replica with Spark through the target metastore: check that path end to end.

A Parquet table is created through ``HmsCatalog`` (no Spark DDL), a data file is put at its
location, and a Spark session configured only with the metastore URI and warehouse dir selects it.
Spark runs in a child process: the Hive catalog is a static, per-JVM setting that must not leak
into (or depend on) other tests' Spark sessions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.embedded_metastore.server import EmbeddedMetastore
from streamer.events.model import (
    Column,
    DatabaseSnapshot,
    PartitionSnapshot,
    SerDe,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.thrift import HmsCatalog

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

PARQUET_SD = StorageDescriptor(
    columns=[Column("id", "bigint"), Column("name", "string")],
    input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    output_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    serde=SerDe(
        serialization_lib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
        parameters={"serialization.format": "1"},
    ),
)


def _loc(path: Path) -> str:
    """A Hadoop location: ``Path.as_uri()`` would percent-encode ``=``, which Hadoop keeps literally."""
    return f"file://{path}"


SPARK_READ = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession
    uri, warehouse, db = sys.argv[1:4]
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("streamer-hms-read-check")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    try:
        flat = sorted(tuple(r) for r in spark.sql(f"select * from {db}.t").collect())
        parted = sorted(tuple(r) for r in spark.sql(f"select id, name, dt from {db}.p").collect())
        print("RESULT " + json.dumps({"flat": flat, "parted": parted}))
    finally:
        spark.stop()
    """
)


def test_spark_reads_a_parquet_table_created_through_the_catalog(
    hms: EmbeddedMetastore, hms_catalog: HmsCatalog, tmp_path: Path
) -> None:
    db = f"spark_{uuid.uuid4().hex[:8]}"
    hms_catalog.create_database(DatabaseSnapshot(name=db, location=(hms.warehouse_dir / f"{db}.db").as_uri()))
    try:
        flat_dir = hms.warehouse_dir / f"{db}.db" / "t"
        hms_catalog.create_table(
            TableSnapshot(
                name="t",
                db=db,
                sd=dataclasses.replace(PARQUET_SD, location=_loc(flat_dir)),
            )
        )
        flat_dir.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}), flat_dir / "part-0.parquet"
        )

        part_table_dir = hms.warehouse_dir / f"{db}.db" / "p"
        part_sd = dataclasses.replace(PARQUET_SD, location=_loc(part_table_dir))
        hms_catalog.create_table(
            TableSnapshot(name="p", db=db, sd=part_sd, partition_keys=[Column("dt", "string")])
        )
        part_dir = part_table_dir / "dt=2024-01-01"
        part_dir.mkdir(parents=True)
        pq.write_table(
            pa.table({"id": pa.array([7], pa.int64()), "name": ["x"]}), part_dir / "part-0.parquet"
        )
        hms_catalog.add_partitions(
            db,
            "p",
            [
                PartitionSnapshot(
                    values=["2024-01-01"],
                    sd=dataclasses.replace(part_sd, location=_loc(part_dir)),
                )
            ],
        )

        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        proc = subprocess.run(
            [sys.executable, "-c", SPARK_READ, hms.uri, str(hms.warehouse_dir), db],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=tmp_path,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        assert proc.returncode == 0 and lines, proc.stderr[-3000:]
        result = json.loads(lines[-1].removeprefix("RESULT "))
        assert result["flat"] == [[1, "a"], [2, "b"]]
        assert result["parted"] == [[7, "x", "2024-01-01"]]
    finally:
        hms_catalog.drop_database(db)
