"""The README's promise: `streamer demo` runs the whole pipeline, the target equals the source, and its
output reads clean: no traceback, no warning line, no summary line wrapped (one demo run for all)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.ci]  # the CI tier (make test-ci)


def test_demo_replicates_the_scripted_workload(tmp_path: Path) -> None:
    """Run with ``--keep``, as a user trying it out would: the printed command writes to the source,
    the target applies it, and Ctrl-C's summary counts it (issue 40: it was the first workload's)."""
    streamer = Path(sys.executable).with_name("streamer")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    work = tmp_path / "demo"
    proc = subprocess.Popen(
        [str(streamer), "demo", "--keep", "--output", "json", "--pause", "0.05", "--work-dir", str(work)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr or []), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("Press Ctrl-C" in line for line in stderr) or proc.poll() is not None, 420)
        assert proc.poll() is None, "".join(stderr)[-3000:]
        printed = "".join(stderr)
        source_url = re.search(r"source warehouse +(\S+)", printed)
        target_metrics = re.search(r"target /metrics +(\S+)", printed)
        assert source_url and target_metrics, printed[-3000:]
        wrote = subprocess.run(
            [str(streamer), "warehouse", "--url", source_url.group(1), "insert", "sales", "orders",
             "--partition", "dt=2024-01-04", "--rows",
             '[{"id": 99, "name": "new", "amount": 5.0, "ok": true}]'],
            capture_output=True, text=True, timeout=60, env=env, check=True,
        )
        new_event = max(int(i) for i in re.findall(r"\d+", wrote.stdout.split("events", 1)[1]))
        wait_for(lambda: applied(target_metrics.group(1), "sales") >= new_event, 120)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    assert out.strip(), f"no summary printed; stderr tail:\n{''.join(stderr)[-3000:]}"
    summary = json.loads(out.strip().splitlines()[-1])
    assert proc.returncode == 0, f"demo failed: {summary}\n{''.join(stderr)[-3000:]}"
    assert summary["source_last_event_id"] >= new_event and summary["target_last_event_id"] >= new_event
    orders = next(t for t in summary["tables"] if t["name"] == "sales.orders")
    assert orders["target_rows"] == orders["source_rows"]
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
    # its job held and bound its state dir as `target run` does: a second job there is refused
    bound = json.loads((tmp_path / "demo" / "target" / "state" / "target.json").read_text())
    assert bound["source_id"] == "demo" and bound["topic"] == "streamer.demo.events"
    assert_reads_clean(out + "".join(stderr))
    assert_summary_does_not_wrap(summary)


def wait_for(condition: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s"
        time.sleep(0.5)


def applied(metrics_url: str, db: str) -> float:
    """The target's ``streamer_target_last_applied_event_id`` of ``db`` (0 before it has one)."""
    try:
        with urllib.request.urlopen(metrics_url, timeout=5) as response:
            page = response.read().decode()
    except OSError:
        return 0.0
    found = re.search(rf'^streamer_target_last_applied_event_id{{db="{db}"}} (\S+)$', page, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def assert_reads_clean(output: str) -> None:
    """What the demo prints besides its own lines: nothing (warnings only when something is wrong)."""
    assert "Traceback" not in output, f"a traceback in the demo's output:\n{output[-6000:]}"
    warnings = [line for line in output.splitlines() if re.search(r"\bWARN(ING)?\b", line)]
    assert not warnings, "warning lines in the demo's output:\n" + "\n".join(warnings)


def assert_summary_does_not_wrap(summary: dict[str, object]) -> None:
    """The text rendering of this run's summary on an 80-column terminal: every summary line whole."""
    from rich.console import Console

    from streamer.demo import render, summary_lines

    out = io.StringIO()
    render(summary, Console(file=out, width=80, color_system=None))
    lines = out.getvalue().splitlines()
    for line in summary_lines(summary):
        assert line in lines, f"summary line wrapped or missing: {line!r}\n{out.getvalue()}"
