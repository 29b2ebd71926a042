"""The target job on a real multi-process Spark cluster: ``local-cluster[2,1,768]`` runs two worker
JVMs, each with an executor JVM and its own Python workers. The job applies in ``database`` lanes,
and large copies run as tasks in those executors (not in the driver), and the target equals the source.
The executors import streamer from a zip shipped with ``--py-files`` (as spark-submit ships one).
"""

from __future__ import annotations

import json
import re
import time
import zipfile
from pathlib import Path

import pytest

from streamer.events.model import Column
from streamer.kafka.broker import EmbeddedBroker
from streamer.warehouse.workload import COLUMNS
from tests.integration.target.helpers import (
    Source,
    TargetProcess,
    TargetStack,
    assert_target_equals_source,
    wait_converged,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CLUSTER = "local-cluster[2,1,768]"
_STAGED = re.compile(
    r"staged by (\d+) Spark tasks .*python workers \[([\d, ]+)\], executor JVMs \[([\d, ]+)\]; "
    r"streamer from \[([^\]]*)\]"
)
PACKAGE = Path(__file__).resolve().parents[3] / "streamer"


def package_zip(path: Path) -> Path:
    """This tree's ``streamer`` package as a zip for ``--py-files`` (what docs/deploy.md builds)."""
    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted(PACKAGE.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                zf.write(file, file.relative_to(PACKAGE.parent).as_posix())
    return path


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_local_cluster_job_copies_on_executors_and_applies_database_lanes(
    broker: EmbeddedBroker,
    source: Source,
    target_stack: TargetStack,
    target_jobs: list[TargetProcess],
    prefix: str,
) -> None:
    started = time.monotonic()
    wh = source.publishing()
    rows = [{"id": i, "name": f"n{i}", "amount": i * 1.5, "ok": i % 2 == 0} for i in range(40)]
    dbs = [f"{prefix}{c}" for c in "abcd"]
    for db in dbs:
        wh.create_database(db)
        wh.create_table(db, "facts", COLUMNS, [Column("dt", "string")])
        wh.create_table(db, "dims", COLUMNS, [])
    for db in dbs:
        wh.insert(db, "facts", rows, {"dt": "2024-03-01"}, n_files=6)  # 6 files: executors
        wh.insert(db, "dims", rows[:3])  # 1 file: the driver's pool
    job = TargetProcess(target_stack, broker.bootstrap_servers, source, extra=[
        "--spark-master", CLUSTER, "--consistency", "database", "--apply-lanes", "4",
        "--executor-copy-min-files", "4", "--executor-copy-min-bytes", "0",
        "--py-files", str(package_zip(target_stack.base.parent / "streamer.zip")),
        # state and checkpoint as URLs: a local path stands in for the shared filesystem
        "--state-dir", target_stack.state_dir.as_uri(),
        "--checkpoint-dir", (target_stack.base / "checkpoint").as_uri(),
    ]).start()
    target_jobs.append(job)
    wait_converged(job, source, timeout=420)
    wh.insert(dbs[0], "facts", rows, {"dt": "2024-03-02"}, n_files=5, overwrite=False)  # while it runs
    wait_converged(job, source)
    seen = assert_target_equals_source(source, target_stack, None)
    assert seen.files >= 4 * 7 + 5

    # copies ran in executor processes: Python workers under executor JVMs, not the driver
    copies = [m.groups() for m in _STAGED.finditer(job.tail(200_000))]
    assert len(copies) == 5, job.tail(4000)
    workers = {int(p) for _, w, _, _ in copies for p in w.split(",")}
    jvms = {int(p) for _, _, j, _ in copies for p in j.split(",")}
    modules = {m for *_, m in copies}
    assert all("streamer.zip" in m for m in modules), modules  # shipped with --py-files
    assert job.proc is not None and job.proc.pid not in workers
    assert jvms and 0 not in jvms
    for pid in jvms:
        assert "CoarseGrainedExecutorBackend" in _cmdline(pid), (pid, _cmdline(pid))
    assert job.metric("streamer_target_executor_files_copied_total") == 4 * 6 + 5

    status = json.loads(target_stack.cli("status", "--hms-uri", target_stack.hms.uri, "--state-dir",
                                         str(target_stack.state_dir), "--output", "json").stdout)
    assert status["consistency"] == "database" and "per database" in status["guarantee"]
    assert (target_stack.base / "checkpoint" / "offsets").is_dir()
    print(f"\nlocal-cluster: {len(copies)} executor copies on JVMs {sorted(jvms)}, "
          f"{time.monotonic() - started:.1f} s")
