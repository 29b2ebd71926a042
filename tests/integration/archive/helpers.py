"""What the archive's integration tests share besides fixtures: ``streamer load`` in a child process,
and a target job run until it has applied the source's events."""

from __future__ import annotations

from pathlib import Path

from tests.integration.target.helpers import Source, TargetStack
from tests.integration.target.in_process import TargetInProcess


def load(stack: TargetStack, archive: Path, *extra: str, ok: tuple[int, ...] = (0,)) -> str:
    """``streamer load --from archive`` into ``stack`` in a child process given no broker address (it
    must exit with a code in ``ok``); its stdout and stderr."""
    done = stack.cli(
        "load", "--from", str(archive), "--hms-uri", stack.hms.uri, "--warehouse-root",
        stack.warehouse_root.as_uri(), "--external-base-dir", stack.external_base.as_uri(), "--state-dir",
        str(stack.state_dir), *extra, ok=ok,
    )
    return done.stdout + done.stderr


def converge(job: TargetInProcess, stack: TargetStack, source: Source) -> None:
    """Wait (120 s at most) until ``stack`` holds every source database's newest event id with no
    halt, then stop ``job``; it must have ended without an error."""
    expected = source.last_ids()
    try:
        job.wait_for(lambda: not stack.halts() and stack.applied_ids(expected) == expected,
                     f"repl.last.id {expected}", 120)
    finally:
        job.stop()
    assert job.error is None, job.error
