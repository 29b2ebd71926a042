"""What the archive's integration tests share besides fixtures: ``streamer load`` in a child process,
and a target job run until it has applied the source's events."""

from __future__ import annotations

from pathlib import Path

from streamer.target.job.checkpoint import resume_offset
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


def converge(job: TargetInProcess, stack: TargetStack, source: Source, *, committed: bool = False) -> None:
    """Wait (120 s at most) until ``stack`` holds every source database's newest event id with no
    halt (``committed``: and Spark's checkpoint holds a committed batch, which it writes after the
    batch's apply ends), then stop ``job``; it must have ended without an error."""
    expected = source.last_ids()
    checkpoint = str(stack.state_dir / "checkpoint")

    def done() -> bool:
        applied = not stack.halts() and stack.applied_ids(expected) == expected
        return applied and (not committed or resume_offset(checkpoint) is not None)

    try:
        job.wait_for(done, f"repl.last.id {expected}", 120)
    finally:
        job.stop()
    assert job.error is None, job.error
