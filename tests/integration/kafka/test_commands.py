from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.kafka.topics import end_offsets, ensure_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_broker_run_serves_until_sigterm(tmp_path: Path) -> None:
    log_file = tmp_path / "tansu.log"
    entry = "from streamer.cli import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", entry, "broker", "run", "--log-file", str(log_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("bootstrap servers: 127.0.0.1:"), line
        bootstrap = line.split(": ", 1)[1].strip()
        config = {"bootstrap.servers": bootstrap}
        ensure_topic(config, "cli")
        assert end_offsets(config, "cli") == {0: 0}

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        host, port = bootstrap.split(":")
        with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
            sock.connect((host, int(port)))  # the broker went away with the command
        assert log_file.read_text().strip()  # its output went to the file, not the terminal
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
