"""The README's promise: `streamer demo` runs the whole pipeline, the target equals the source, and its
output reads clean: no traceback, no warning line, no summary line wrapped (one demo run for all)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.ci]  # the CI tier (make test-ci)


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
    # its job held and bound its state dir as `target run` does: a second job there is refused
    bound = json.loads((tmp_path / "demo" / "target" / "state" / "target.json").read_text())
    assert bound["source_id"] == "demo" and bound["topic"] == "streamer.demo.events"
    assert_reads_clean(proc.stdout + proc.stderr)
    assert_summary_does_not_wrap(summary)


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
