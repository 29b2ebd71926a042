"""A wrong broker address: the command ends within seconds with one line naming it, nothing else.

Before, ``streamer status`` took about a minute and printed a thousand librdkafka ``%3|...|FAIL``
lines; ``streamer source run`` retried for ever. Real processes, a real closed port.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from subprocess import run

import pytest

from streamer.kafka.broker import free_port

pytestmark = pytest.mark.integration

STREAMER = shutil.which("streamer", path=str(Path(sys.executable).parent)) or "streamer"


def _commands(tmp_path: Path, address: str) -> dict[str, list[str]]:
    return {
        "source run": ["source", "run", "--source-id", "s1", "--notification-db", str(tmp_path / "hms.db"),
                       "--bootstrap-servers", address],
        "status": ["status", "--hms-uri", "thrift://127.0.0.1:1", "--state-dir", str(tmp_path / "state"),
                   "--bootstrap-servers", address],
        "target run": ["target", "run", "--source-id", "s1", "--bootstrap-servers", address,
                       "--hms-uri", "thrift://127.0.0.1:1", "--warehouse-root", str(tmp_path / "wh"),
                       "--state-dir", str(tmp_path / "state")],
    }


@pytest.mark.parametrize("command", ["source run", "status", "target run"])
def test_a_closed_port_fails_fast_with_one_line_naming_it(tmp_path: Path, command: str) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    env = {**os.environ, "STREAMER_KAFKA_CONNECT_TIMEOUT": "5"}
    (tmp_path / "state").mkdir()  # status validates its state dir before any work: a job's
    (tmp_path / "state" / "job-mode.json").write_text("{}")
    started = time.monotonic()
    done = run([STREAMER, *_commands(tmp_path, address)[command]], capture_output=True, text=True,
               timeout=60, env=env, cwd=tmp_path)
    elapsed = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert elapsed < 30, f"{command} took {elapsed:.0f} s"
    assert "Traceback" not in output and "%3|" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert address in errors[0] and "--bootstrap-servers" in errors[0], errors[0]
    assert len(output.splitlines()) <= 5, output  # no flood of librdkafka lines
