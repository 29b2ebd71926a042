"""Helpers of the target end-to-end tests: a target job as a child process, a Spark reader of a
target metastore (also a child process: the Hive catalog is a static, per-JVM setting), waiting for
convergence, and the source-versus-target comparison (rows, partitions, metadata, file checksums).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self
from urllib.parse import unquote, urlsplit

from prometheus_client.parser import text_string_to_metric_families

from streamer.embedded_metastore.server import EmbeddedMetastore, free_port
from streamer.metastore.catalog import LAST_ID_PARAM
from streamer.metastore.thrift import HmsCatalog
from streamer.source.agent import AgentConfig, SourceAgent
from streamer.source.enrich import EnrichSettings
from streamer.source.reader import SqlNotificationReader
from streamer.target.apply.files import TMP_PREFIX
from streamer.target.state.state_file import Halt, TargetState
from streamer.testing.campaign import Child
from streamer.warehouse import Warehouse
from streamer.warehouse.files import CHECKSUM_ALGORITHM
from tests.fixtures.spark_child import SparkChild, session_script

STREAMER = str(Path(sys.executable).with_name("streamer"))


class TargetError(AssertionError):
    """The target did not converge (halted, died, or too slow); the message carries the evidence."""


# --- source side -----------------------------------------------------------------------------


@dataclass
class Source:
    """A bundled source warehouse and its agent publishing into ``topic``."""

    warehouse: Warehouse
    agent: SourceAgent
    topic: str
    source_id: str
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)

    @classmethod
    def open(cls, work: Path, kafka: dict[str, Any], topic: str, source_id: str,
             message_format: str = "json-0.2") -> Source:
        work.mkdir(parents=True, exist_ok=True)
        url = str(work / "metastore.sqlite")
        wh = Warehouse.open(url, root=work / "warehouse", cmroot=work / "cmroot",
                            message_format=message_format, source_id=source_id)
        config = AgentConfig(
            source_id, kafka, topic=topic, batch_size=200, poll_interval=0.05, gap_settle_seconds=0.5,
            enrich=EnrichSettings(checksum_algorithm=CHECKSUM_ALGORITHM, cmroot=str(work / "cmroot")),
        )
        agent = SourceAgent(config, SqlNotificationReader(url))
        agent.start()
        return cls(wh, agent, topic, source_id)

    def publish(self) -> int:
        """Publish everything written so far (the agent runs in the caller's thread)."""
        self.agent.run(once=True)
        assert self.agent.last_id == self.warehouse.current_event_id()
        return self.agent.last_id

    def start_background(self) -> None:
        """Publish continuously from a thread, as a deployed agent does."""

        def loop() -> None:
            try:
                self.agent.run(stop=self._stop)
            except BaseException as exc:
                self.errors.append(exc)

        self._thread = threading.Thread(target=loop, name="test-agent", daemon=True)
        self._thread.start()

    def stop_background(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        self._stop = threading.Event()
        if self.errors:
            raise self.errors[0]

    def close(self) -> None:
        self.stop_background()
        self.agent.close()
        self.agent.reader.close()
        self.warehouse.close()

    def publishing(self) -> Any:
        """The warehouse, publishing after each change: the agent keeps up, as deployed agents do.

        (A file replaced before the agent publishes its event gets the new file's size in the
        event; see ``test_faults.test_file_replaced_before_publish_copies_from_cmroot``.)"""
        return _Publishing(self.warehouse, self.agent)

    def last_ids(self) -> dict[str, int]:
        """Per current source database, the id of its newest event: its replica's ``repl.last.id``."""
        current = set(self.warehouse.databases())
        out: dict[str, int] = {}
        for row in self.warehouse.notifications():
            if row.db_name and row.db_name.lower() in current:
                out[row.db_name.lower()] = row.event_id
        return out


class _Publishing:
    def __init__(self, wh: Warehouse, agent: SourceAgent) -> None:
        self._wh = wh
        self._agent = agent

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._wh, name)
        if name in _READS or name.startswith("_") or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            while self._agent.run_once():
                pass
            return result

        return call


_READS = frozenset({"current_event_id", "rows", "tables", "databases", "database", "table", "partitions",
                    "partition_snapshots", "functions", "files", "notifications", "txns", "root", "cmroot"})


class Stream(Protocol):
    """What a target job needs to know of its source: the source id and the topic it publishes to."""

    @property
    def source_id(self) -> str: ...

    @property
    def topic(self) -> str: ...


# --- target side -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetStack:
    """One target: its metastore, warehouse root, external base dir, state and checkpoint dirs."""

    hms: EmbeddedMetastore
    base: Path

    @property
    def warehouse_root(self) -> Path:
        return self.base / "warehouse"

    @property
    def external_base(self) -> Path:
        return self.base / "external"

    @property
    def state_dir(self) -> Path:
        return self.base / "state"

    def catalog(self) -> HmsCatalog:
        return HmsCatalog(self.hms.uri)

    def halts(self) -> dict[str, Halt]:
        return TargetState(self.state_dir).halts()

    def applied_ids(self, dbs: Iterable[str]) -> dict[str, int]:
        """``repl.last.id`` of each database (0 when it is absent or has none)."""
        out = {}
        with self.catalog() as catalog:
            for db in dbs:
                snap = catalog.get_database(db)
                out[db] = int(snap.parameters.get(LAST_ID_PARAM, "0") or 0) if snap else 0
        return out

    def cli(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        """``streamer <args>`` against this target's state; raises with its output when it exits with
        a code not in ``ok`` (``status`` exits 1 while a database is halted)."""
        done = subprocess.run([STREAMER, *args], capture_output=True, text=True, timeout=120)
        if done.returncode not in ok:
            raise TargetError(f"streamer {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}")
        return done


def target_argv(stack: TargetStack, bootstrap: str, source: Stream, *, metrics_port: int,
                roots: tuple[str, str] | None = None, extra: Sequence[str] = ()) -> list[str]:
    """``target run``'s flags for ``stack`` fed by ``source``: a test's job, in a child process or in
    this one. ``roots``: warehouse root and external base dir URLs (an object store's) instead of
    the stack's local directories."""
    warehouse, external = roots or (stack.warehouse_root.as_uri(), stack.external_base.as_uri())
    return [
        "target", "run",
        "--bootstrap-servers", bootstrap,
        "--source-id", source.source_id,
        "--topic", source.topic,
        "--hms-uri", stack.hms.uri,
        "--warehouse-root", warehouse,
        "--external-base-dir", external,
        "--state-dir", str(stack.state_dir),
        "--trigger-seconds", "0.1",
        "--metrics-port", str(metrics_port),
        *extra,
    ]


class TargetProcess(Child):
    """``streamer target run`` as a child process (its own process group, so SIGKILL takes all of it).
    Tests about what the job applies use ``TargetInProcess`` (tests/integration/target/in_process.py)."""

    def __init__(self, stack: TargetStack, bootstrap: str, source: Stream, *, extra: Sequence[str] = (),
                 name: str = "target", roots: tuple[str, str] | None = None) -> None:
        """``roots``: warehouse root and external base dir URLs (an object store's) instead of the
        stack's local directories."""
        self.stack = stack
        self.metrics_port = free_port()
        argv = target_argv(stack, bootstrap, source, metrics_port=self.metrics_port, roots=roots, extra=extra)
        super().__init__(name, argv, stack.base / f"{name}.log")

    def start(self) -> Self:
        assert not self.alive, "already running"
        self.stack.base.mkdir(parents=True, exist_ok=True)
        return super().start()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples named ``name`` (matching ``labels``) on the job's /metrics."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def wait_for(self, cond: Callable[[], bool], what: str, timeout: float = 180.0) -> None:
        """Poll ``cond`` until true; fail early (with the log) when the job died."""
        poll_job(self, cond, what, timeout)


class _Job(Protocol):
    @property
    def alive(self) -> bool: ...

    def tail(self, chars: int = 3000) -> str: ...


def poll_job(job: _Job, cond: Callable[[], bool], what: str, timeout: float, ended: str = "") -> None:
    """Poll ``cond`` until true; fail early, with the job's log (and ``ended``: why), once it ended."""
    deadline = time.monotonic() + timeout
    while not cond():
        if not job.alive:
            raise TargetError(f"target job ended ({what}): {ended}{job.tail(4000)}")
        if time.monotonic() > deadline:
            raise TargetError(f"timed out after {timeout:.0f} s waiting for {what}: {job.tail(4000)}")
        time.sleep(0.25)


def wait_converged(process: TargetProcess, source: Source, db_map: dict[str, str] | None = None,
                   timeout: float = 240.0, allow_halts: bool = False) -> None:
    """Wait until every source database's replica holds its newest event id (and dropped ones are gone)."""
    db_map = db_map or {}
    expected = {db_map.get(db, db): last for db, last in source.last_ids().items()}

    def done() -> bool:
        halts = process.stack.halts()
        if halts and not allow_halts:
            raise TargetError(f"target halted: {halts}")
        return process.stack.applied_ids(expected) == expected

    process.wait_for(done, f"repl.last.id {expected}", timeout)


# --- reading a target through Spark ----------------------------------------------------------

_READER = session_script(
    "streamer-target-reader",
    """
    def answer(req):
        op = req["op"]
        if op == "databases":
            return sorted(r[0] for r in spark.sql("SHOW DATABASES").collect())
        if op == "tables":
            rows = spark.sql(f"SHOW TABLES IN `{req['db']}`").collect()
            return sorted(r["tableName"] for r in rows if not r["isTemporary"])
        if op == "rows":
            name = f"`{req['db']}`.`{req['table']}`"
            spark.sql(f"REFRESH TABLE {name}")
            return [r.asDict() for r in spark.sql(f"SELECT * FROM {name}").collect()]
        if op == "partitions":
            name = f"`{req['db']}`.`{req['table']}`"
            return sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {name}").collect())
        raise ValueError(op)

    print("READY", flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            out = {"ok": answer(req)}
        except Exception as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        print("RESULT " + json.dumps(out, default=str), flush=True)
    spark.stop()
    """,
    conf=[("spark.sql.session.timeZone", "UTC")],
)


class SparkReader:
    """A Spark session on a target metastore, in a child process answering one JSON request per line."""

    def __init__(self, hms_uri: str, warehouse: Path, log_path: Path) -> None:
        self._child = SparkChild(_READER, [hms_uri, str(warehouse)], log_path, what="Spark reader",
                                 error=TargetError)

    def ask(self, op: str, **args: str) -> Any:
        out = self._child.ask(op=op, **args)
        if "error" in out:
            raise TargetError(f"spark {op} {args}: {out['error']}")
        return out["ok"]

    def close(self) -> None:
        self._child.close()


# --- comparing -------------------------------------------------------------------------------


def _norm(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _row_key(row: dict[str, Any]) -> str:
    return json.dumps(_norm(row), sort_keys=True)


def by_partition(rows: Iterable[dict[str, Any]], keys: Sequence[str]) -> dict[str, Counter[str]]:
    """Rows grouped by their partition values (as ``k=v/...``), each group a multiset."""
    out: dict[str, Counter[str]] = {}
    for row in rows:
        name = "/".join(f"{k}={row[k]}" for k in keys)
        out.setdefault(name, Counter())[_row_key(row)] += 1
    return out


def _diff(source: dict[str, Counter[str]], target: dict[str, Counter[str]]) -> str:
    out = []
    for part in sorted(set(source) | set(target)):
        a, b = source.get(part, Counter()), target.get(part, Counter())
        if a != b:
            out.append(f"[{part}] only source {dict(a - b)} only target {dict(b - a)}")
    return "; ".join(out)[:3000]


def _path(location: str) -> Path:
    return Path(unquote(urlsplit(location).path))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _visible_files(directory: Path) -> Iterator[Path]:
    if not directory.is_dir():
        return
    for p in sorted(directory.iterdir()):
        if p.is_file() and not p.name.startswith((".", "_")):
            yield p


def target_files(catalog: HmsCatalog, db: str, table: str) -> Counter[tuple[str | None, str, str]]:
    """(partition name, file name, sha256) of every visible data file of a target table."""
    snap = catalog.get_table(db, table)
    assert snap is not None, f"{db}.{table} missing on the target"
    out: Counter[tuple[str | None, str, str]] = Counter()
    if not snap.partition_keys:
        assert snap.sd.location, f"{db}.{table} has no location"
        for f in _visible_files(_path(snap.sd.location)):
            out[(None, f.name, sha256(f))] += 1
        return out
    keys = [k.name for k in snap.partition_keys]
    for part in catalog.list_partitions(db, table):
        name = "/".join(f"{k}={v}" for k, v in zip(keys, part.values, strict=True))
        assert part.sd.location, f"{db}.{table}/{name} has no location"
        for f in _visible_files(_path(part.sd.location)):
            out[(name, f.name, sha256(f))] += 1
    return out


def source_files(wh: Warehouse, db: str, table: str) -> Counter[tuple[str | None, str, str]]:
    out: Counter[tuple[str | None, str, str]] = Counter()
    for ref in wh.files(db, table):
        assert ref.checksum, ref
        out[(ref.partition, Path(_path(ref.uri)).name, ref.checksum)] += 1
    return out


def leftovers(*roots: Path) -> list[Path]:
    """Staging files of interrupted copies anywhere under the target roots."""
    return [p for root in roots if root.exists() for p in root.rglob(f"{TMP_PREFIX}*")]


_VOLATILE = ("transient_", "repl.", "streamer.", "numFiles", "totalSize", "numRows", "rawDataSize",
             "COLUMN_STATS")


def _params(params: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in params.items() if not k.startswith(_VOLATILE)}


@dataclass
class Comparison:
    """What was compared, for the report; ``assert_equal`` raises on the first difference."""

    tables: int = 0
    partitions: int = 0
    rows: int = 0
    files: int = 0


def assert_target_equals_source(source: Source, stack: TargetStack, reader: SparkReader | None,
                                db_map: dict[str, str] | None = None) -> Comparison:
    """Databases, tables, metadata, rows per partition (via Spark SQL) and file checksums agree.

    Without a reader, names and partitions come from the catalog and rows are not read (equal
    files with equal checksums hold equal rows)."""
    wh = source.warehouse
    db_map = db_map or {}
    seen = Comparison()
    with stack.catalog() as catalog:
        spark_dbs = set(reader.ask("databases") if reader else catalog.list_databases())
    for db in sorted(wh.databases()):
        tdb = db_map.get(db, db)
        assert tdb in spark_dbs, f"database {tdb} missing on the target"
        with stack.catalog() as catalog:
            tdb_snap = catalog.get_database(tdb)
            assert tdb_snap is not None
            assert _params(tdb_snap.parameters) == _params(dict(wh.database(db).parameters)), db
            tables = reader.ask("tables", db=tdb) if reader else catalog.list_tables(tdb)
            assert sorted(tables) == sorted(wh.tables(db)), f"tables of {db}"
            for table in sorted(wh.tables(db)):
                src = wh.table(db, table)
                tgt = catalog.get_table(tdb, table)
                assert tgt is not None, f"{tdb}.{table} missing"
                what = f"{db}.{table}"
                assert tgt.table_type == src.table_type, what
                columns = [(c.name, c.type) for c in src.sd.columns]
                assert [(c.name, c.type) for c in tgt.sd.columns] == columns, what
                assert [c.name for c in tgt.partition_keys] == [c.name for c in src.partition_keys], what
                assert _params(tgt.parameters) == _params(dict(src.parameters)), what
                if src.table_type == "VIRTUAL_VIEW":
                    continue
                seen.tables += 1
                keys = [k.name for k in src.partition_keys]
                if keys:
                    src_parts = sorted("/".join(f"{k}={v}" for k, v in p.items())
                                       for p in wh.partitions(db, table))
                    parts = reader.ask("partitions", db=tdb, table=table) if reader else sorted(
                        "/".join(f"{k}={v}" for k, v in zip(keys, p.values, strict=True))
                        for p in catalog.list_partitions(tdb, table))
                    assert parts == src_parts, f"partitions of {what}"
                    seen.partitions += len(src_parts)
                files = source_files(wh, db, table)
                got = target_files(catalog, tdb, table)
                assert got == files, f"files of {what}: only source {files - got}, only target {got - files}"
                seen.files += sum(files.values())
                if reader is None:
                    continue
                src_rows = by_partition(wh.rows(db, table), keys)
                tgt_rows = by_partition(reader.ask("rows", db=tdb, table=table), keys)
                assert tgt_rows == src_rows, f"rows of {what}: {_diff(src_rows, tgt_rows)}"
                seen.rows += sum(sum(c.values()) for c in src_rows.values())
    for db in db_map.values() if db_map else []:
        if db not in {db_map.get(d, d) for d in wh.databases()}:
            assert db not in spark_dbs, f"dropped database {db} still on the target"
    left = leftovers(stack.warehouse_root, stack.external_base)
    assert not left, f"staging files left behind: {left[:5]}"
    return seen


# --- workloads -------------------------------------------------------------------------------


def seed_databases(wh: Warehouse, prefix: str, n: int = 3) -> list[str]:
    """``n`` uniquely named databases (the workload then makes no others: it stops at three)."""
    names = [f"{prefix}{chr(ord('a') + i)}" for i in range(n)]
    for name in names:
        if name not in wh.databases():
            wh.create_database(name, {"owner.team": "fin"})
    return names


def mixed_workload(wh: Warehouse, prefix: str, n_events: int, seed: int) -> int:
    """A random mix of at least ``n_events`` events plus what the random mix lacks: an external
    partitioned table, a database created, filled and dropped; ends with an INSERT. Returns the
    last event id."""
    from streamer.events.model import Column
    from streamer.warehouse.workload import COLUMNS, Workload

    first = wh.current_event_id()
    a, b, _ = seed_databases(wh, prefix)
    day = [Column("dt", "string")]
    ext = f"ext{first}"
    wh.create_table(a, ext, COLUMNS, day, external=True, location=wh.root / "external" / a / ext)
    rows = [{"id": i, "name": f"n{i}", "amount": i * 1.5, "ok": i % 2 == 0} for i in range(5)]
    wh.insert(a, ext, rows, {"dt": "2024-02-01"}, n_files=2)
    Workload(wh, seed=seed).run(max(0, n_events - (wh.current_event_id() - first) - 6))
    gone = f"{prefix}gone{first}"
    wh.create_database(gone)
    wh.create_table(gone, "t", COLUMNS, day)
    wh.insert(gone, "t", rows, {"dt": "2024-02-02"})
    wh.drop_database(gone, cascade=True)
    wh.create_table(b, f"tail{first}", COLUMNS, [])
    wh.insert(b, f"tail{first}", rows, n_files=2)
    return wh.current_event_id()


def wait_applied(job: TargetProcess, stack: TargetStack, expected: dict[str, int], timeout: float) -> None:
    """Wait until every database's ``repl.last.id`` reached ``expected``; a halt fails at once."""

    def done() -> bool:
        halts = stack.halts()
        assert not halts, halts
        return all(v >= expected[k] for k, v in stack.applied_ids(expected).items())

    job.wait_for(done, f"repl.last.id >= {expected}", timeout)

