"""Hive's change management in the embedded metastore: ``streamer hms run --notifications --cmroot``.

A source started as production runs one, written to by Spark SQL with Hive support (a child
process: the Hive catalog is a static, per-JVM setting). What Hive 2.3.10's ``ReplChangeManager``
does, checked here on real files:

- DROP PARTITION and DROP TABLE of a managed table move each of its files (every name not starting
  with ``.``, so Spark's empty ``_SUCCESS`` too) into the cmroot, named by the file's checksum alone
  (2.3's ``getCMPath``: ``<cmroot>/<checksum>``; Hive 3+ names ``<name>_<checksum>``); the checksum
  is the MD5 of the bytes (streamer's local filesystem gives it, Hadoop's gives none);
- INSERT OVERWRITE keeps nothing there, whether Spark writes the table itself (Parquet) or through
  Hive 2.3's ``Hive.loadTable`` (text): the writer deletes the old files, the metastore never sees them.

The agent's fallback for references that name no cmroot (``--cmroot``, Hive 2.3's ``uri#checksum``)
must point where Hive keeps the file: checked against ``ReplChangeManager.getCMPath`` itself (through
py4j) and against the files this metastore recycled.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from streamer.embedded_metastore.cm import CHECKSUM, CHECKSUM_KEY, cmroot_uri
from streamer.embedded_metastore.launch import local_fs_classes, pyspark_jars_dir
from streamer.embedded_metastore.localfs import FS_CLASS
from streamer.events.model import EventType, FileRef
from streamer.hive.decode import decode_row
from streamer.source.enrich import (
    EnrichSettings,
    FsspecInspector,
    enrich_event,
    enrich_ref,
    hive2_cm_path,
    map_refs,
)
from streamer.source.thrift_reader import ThriftNotificationReader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(500)]

DB = "cm_db"

SPARK_WRITES = textwrap.dedent(
    """
    import hashlib, json, os, sys
    from pyspark.sql import SparkSession
    uri, warehouse, cmroot, classes = sys.argv[1:5]
    db = "%(db)s"
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("streamer-cmroot-check")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.driver.extraClassPath", classes)  # checksums in INSERT events, as on HDFS
        .config("spark.hadoop.fs.file.impl", "%(fs)s")
        .config("spark.hadoop.%(checksum_key)s", "%(checksum)s")
        .config("spark.hadoop.hive.metastore.dml.events", "true")
        .config("spark.hadoop.hive.metastore.uris", uri)
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )

    def files(rel):  # {name: md5} of the files Hive's change manager looks at (not '.'-hidden ones)
        folder = os.path.join(warehouse, f"{db}.db", rel)
        return {n: hashlib.md5(open(os.path.join(folder, n), "rb").read()).hexdigest()
                for n in sorted(os.listdir(folder)) if not n.startswith(".")}

    def cm():
        return sorted(n for n in os.listdir(cmroot) if not n.startswith(".")) if os.path.isdir(cmroot) else []

    out = {}
    try:
        spark.sql(f"create database {db}")
        for table, fmt in (("pq", "parquet"), ("txt", "textfile")):
            spark.sql(f"create table {db}.{table} (id int, name string) stored as {fmt}")
            spark.sql(f"insert into {db}.{table} values (1, 'a'), (2, 'b')")
            out[f"{table}_before"] = files(table)
            spark.sql(f"insert overwrite table {db}.{table} values (3, 'c')")
            out[f"{table}_after"] = files(table)
            out[f"cm_after_{table}_overwrite"] = cm()
        spark.sql("set spark.sql.hive.convertMetastoreParquet=false")  # Hive's writer: INSERT events
        spark.sql(f"create table {db}.p (id int) partitioned by (dt string) stored as parquet")
        spark.sql(f"insert into {db}.p partition (dt='x') values (1)")
        spark.sql(f"insert into {db}.p partition (dt='y') values (2)")
        spark.sql(f"insert into {db}.p partition (dt='x') values (3)")  # an INSERT naming its files
        out["p_x"] = files("p/dt=x")
        spark.sql(f"alter table {db}.p drop partition (dt='x')")
        out["cm_after_drop_partition"] = cm()
        spark.sql(f"drop table {db}.pq")
        out["cm_after_drop_table"] = cm()
        print("RESULT " + json.dumps(out))
    finally:
        spark.stop()
    """
) % {"db": DB, "fs": FS_CLASS, "checksum_key": CHECKSUM_KEY, "checksum": CHECKSUM}


@pytest.fixture
def source_hms(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """``streamer hms run --notifications --cmroot`` in the foreground: (uri, warehouse, cmroot)."""
    work, cmroot = tmp_path / "hms", tmp_path / "cmroot"
    argv = [str(Path(sys.executable).with_name("streamer")), "hms", "run", "--notifications",
            "--cmroot", str(cmroot), "--work-dir", str(work)]
    out = tmp_path / "hms.out"
    with out.open("wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while "metastore ready at " not in out.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, out.read_text()[-3000:]
            time.sleep(0.5)
        text = out.read_text()
        assert "metastore ready at " in text, text[-3000:]
        assert "notification log: on" in text and f"change management: on, cmroot {cmroot}" in text
        uri = text.split("metastore ready at ", 1)[1].split()[0]
        yield uri, work / "warehouse", cmroot
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _spark_writes(uri: str, warehouse: Path, cmroot: Path, tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "spark_writes.py"
    script.write_text(SPARK_WRITES)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    classes = local_fs_classes(pyspark_jars_dir(), required_by="the writer's checksums")
    done = subprocess.run([sys.executable, str(script), uri, str(warehouse), str(cmroot), str(classes)],
                          capture_output=True, text=True, timeout=400, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return result


def test_dropped_files_are_kept_in_the_cmroot_by_checksum_overwritten_ones_are_not(
    source_hms: tuple[str, Path, Path], tmp_path: Path
) -> None:
    uri, warehouse, cmroot = source_hms
    result = _spark_writes(uri, warehouse, cmroot, tmp_path)

    # INSERT OVERWRITE: the old files are gone, none of them reached the cmroot
    for table in ("pq", "txt"):
        before, after = result[f"{table}_before"], result[f"{table}_after"]
        replaced = {n for n in before if n.startswith("part-")}
        assert replaced and not replaced & set(after), table
        assert result[f"cm_after_{table}_overwrite"] == [], table
        assert not {before[n] for n in replaced} & set(result["cm_after_drop_table"]), table

    # DROP PARTITION: each file of the partition, named by its MD5 alone (Hive 2.3)
    dropped_partition = set(result["p_x"].values())
    assert len(dropped_partition) == len(result["p_x"]) >= 1
    assert set(result["cm_after_drop_partition"]) == dropped_partition
    assert not (warehouse / f"{DB}.db" / "p" / "dt=x").exists()
    assert (warehouse / f"{DB}.db" / "p" / "dt=y").is_dir()

    # DROP TABLE: the table's current files join them; the table's folder is gone
    dropped_table = set(result["pq_after"].values())
    assert set(result["cm_after_drop_table"]) == dropped_partition | dropped_table
    assert not (warehouse / f"{DB}.db" / "pq").exists()
    assert hashlib.md5(b"").hexdigest() in dropped_table  # Spark's empty _SUCCESS: only '.'-names are skipped

    # each kept file holds the bytes its name is the checksum of, and no Hive 3 `<name>_<checksum>`
    kept = sorted(p for p in cmroot.iterdir() if not p.name.startswith("."))
    assert [p.name for p in kept] == result["cm_after_drop_table"]
    for path in kept:
        assert hashlib.md5(path.read_bytes()).hexdigest() == path.name

    # the source logged the drops, as a production source's listener would
    reader = ThriftNotificationReader(uri)
    try:
        rows = reader.read_after(0, 10_000)
    finally:
        reader.close()
    drops = [(r.event_type, r.table_name) for r in rows if r.db_name == DB and "DROP" in r.event_type]
    assert ("DROP_PARTITION", "p") in drops and ("DROP_TABLE", "pq") in drops

    # the agent's cmroot fallback for the files INSERT events named (Hive 2.3's `uri#checksum`: the
    # writer computes the checksum, here with streamer's filesystem as a writer on HDFS would) finds
    # each file the metastore recycled, with the bytes its checksum describes
    settings = EnrichSettings("md5", cmroot=cmroot_uri(cmroot))
    named: dict[str, FileRef] = {}
    for row in rows:
        if row.db_name == DB and row.table_name == "p" and row.event_type == EventType.INSERT.value:
            map_refs(enrich_event(decode_row(row), settings, FsspecInspector()),
                     lambda ref: named.setdefault(ref.uri, ref))
    in_x = [ref for uri, ref in named.items() if "/dt=x/part-" in uri]
    assert in_x and {ref.checksum for ref in in_x} <= set(result["p_x"].values()), named
    for ref in in_x:
        assert ref.cm_uri is not None and ref.checksum is not None, ref
        kept = Path(urlsplit(ref.cm_uri).path)
        assert kept.parent == cmroot.resolve() and kept.is_file(), ref
        assert hashlib.md5(kept.read_bytes()).hexdigest() == ref.checksum, ref


def test_the_agents_cm_fallback_is_hive_2_3s_get_cm_path(tmp_path: Path) -> None:
    """``ReplChangeManager.getCMPath`` of Hive 2.3.10 (the jar pyspark ships) is the oracle: for the
    checksum strings Hive records (an MD5, HDFS's MD5-of-MD5-of-CRC, one longer than an HDFS path
    component may be) the agent's fallback names the same file."""
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway()
    try:
        jvm = gateway.jvm
        hadoop_path = jvm.org.apache.hadoop.fs.Path
        rcm = jvm.org.apache.hadoop.hive.metastore.ReplChangeManager
        conf = jvm.org.apache.hadoop.conf.Configuration()
        cmroot = cmroot_uri(tmp_path / "cmroot")
        rcm.setCmRoot(hadoop_path(cmroot))
        data = tmp_path / "part-00000-1a2b.c000"
        data.write_bytes(b"some rows")
        uri = f"file:{data}"
        checksums = [(hashlib.md5(b"some rows").hexdigest(), "md5"),
                     ("00000200" + "0000000000000000" + "21c8590a52605e01296312f9dccf3904",
                      "hdfs-md5-of-md5-of-crc32c")]
        for checksum, algorithm in checksums:
            hive = rcm.getCMPath(hadoop_path(uri), conf, checksum).toString()
            ref = enrich_ref(FileRef(uri, checksum=checksum), EnrichSettings(algorithm, cmroot=cmroot),
                             FsspecInspector())
            assert ref.cm_uri is not None
            assert hadoop_path(ref.cm_uri).toString() == hive, checksum
            # what Hive 2.3 writes into a message for the file: `uri#checksum`
            assert rcm.encodeFileUri(uri, checksum) == f"{uri}#{checksum}"
        for length in (255, 256, 400):  # longer than a path component: cut as Hive cuts it
            checksum = ("0123456789abcdef" * 26)[:length]
            hive = rcm.getCMPath(hadoop_path(uri), conf, checksum).toString()
            assert hadoop_path(hive2_cm_path(cmroot, checksum)).toString() == hive, length
    finally:
        gateway.shutdown()
        gateway.proc.kill()  # the JVM pyspark launched for the gateway
        gateway.proc.wait(30)
