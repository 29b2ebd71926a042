"""What the archive's integration tests share besides fixtures: ``streamer load`` in a child process."""

from __future__ import annotations

from pathlib import Path

from tests.integration.target.helpers import TargetStack


def load(stack: TargetStack, archive: Path, *extra: str, ok: tuple[int, ...] = (0,)) -> str:
    """``streamer load --from archive`` into ``stack`` in a child process given no broker address (it
    must exit with a code in ``ok``); its stdout and stderr."""
    done = stack.cli(
        "load", "--from", str(archive), "--hms-uri", stack.hms.uri, "--warehouse-root",
        stack.warehouse_root.as_uri(), "--external-base-dir", stack.external_base.as_uri(), "--state-dir",
        str(stack.state_dir), *extra, ok=ok,
    )
    return done.stdout + done.stderr
