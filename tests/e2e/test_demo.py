"""The README's promise: `streamer demo` runs the whole pipeline and the target equals the source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_demo_replicates_the_scripted_workload(tmp_path: Path) -> None:
    streamer = Path(sys.executable).with_name("streamer")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [str(streamer), "demo", "--output", "json", "--pause", "0.05", "--work-dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=420,
        env=env,
    )
    assert proc.stdout.strip(), f"no summary printed; stderr tail:\n{proc.stderr[-3000:]}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0, f"demo failed: {summary}\n{proc.stderr[-3000:]}"
    assert summary["equal"] is True
    names = {t["name"] for t in summary["tables"]}
    assert {"sales.orders", "sales.clients", "sales.clicks"} <= names
    for table in summary["tables"]:
        assert table["source_rows"] == table["target_rows"], table
    assert sum(t["source_rows"] for t in summary["tables"]) > 0
    assert summary["events_applied"] >= summary["events_published"] > 0
    assert summary["bytes_copied"] > 0
    assert summary["aborted_bytes_copied"] == 0
    assert summary["lag_p50_s"] is not None and summary["lag_p50_s"] >= 0
    assert summary["lag_p99_s"] >= summary["lag_p50_s"]
