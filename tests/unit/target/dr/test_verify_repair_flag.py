"""``streamer target run --verify-repair`` (default on) reaches the job's settings."""

from __future__ import annotations

from pathlib import Path


def test_target_run_repairs_against_the_source_by_default(tmp_path: Path) -> None:
    from streamer.target.commands import run_cmd, run_settings

    base = ["--bootstrap-servers", "127.0.0.1:1", "--hms-uri", "thrift://127.0.0.1:1", "--warehouse-root",
            str(tmp_path / "wh"), "--state-dir", str(tmp_path / "state"), "--verify-every", "60",
            "--verify-source-hms-uri", "thrift://h:1"]
    with run_cmd.make_context("run", list(base)) as ctx:  # click consumes the list it is given
        assert run_settings(ctx.params).verify.repair is True
    with run_cmd.make_context("run", [*base, "--no-verify-repair"]) as ctx:
        assert run_settings(ctx.params).verify.repair is False
