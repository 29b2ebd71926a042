"""A ``streamer`` subcommand as a child process of a test, in its own session, killable as a group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Self

STREAMER = str(Path(sys.executable).with_name("streamer"))


class Child:
    """A ``streamer`` subcommand as a child process in its own session, killable as a whole group."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.argv = [STREAMER, "--log-level", "INFO", *argv]
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0

    def start(self) -> Self:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        with open(self.log_path, "ab") as out:
            out.write(f"\n==== start {self.starts + 1}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,
            )
        self.starts += 1
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group (a JVM and Python workers included): a crash."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20)
        self.kill()

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""
