"""Options of scaling out: the state dir as a URL, the consistency mode in ``streamer status``."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from streamer.cli import cli
from streamer.events.model import FileRef
from streamer.target.job.executor_copy import ExecutorCopy, executor_conf
from streamer.target.job.lanes import GUARANTEES, Consistency
from streamer.target.state.status import read_mode, write_mode, write_progress


def test_state_dir_takes_a_file_url_and_refuses_other_schemes(tmp_path: Path) -> None:
    runner = CliRunner()
    state = tmp_path / "state dir"
    write_progress(state, {"a": (3, 1)}, 3)  # a job's state dir, database a not halted
    done = runner.invoke(cli, ["target", "retry", "--state-dir", state.as_uri(), "--db", "a"])
    assert "database 'a' is not halted" in done.output, done.output
    refused = runner.invoke(cli, ["target", "retry", "--state-dir", "s3://bucket/state", "--db", "a"])
    assert refused.exit_code == 2 and "mounted filesystem" in refused.output, refused.output


def test_mode_is_recorded_for_status(tmp_path: Path) -> None:
    assert read_mode(tmp_path) == {"consistency": "global", "apply_lanes": None}  # older jobs
    write_mode(tmp_path, "database", 4)
    assert read_mode(tmp_path) == {"consistency": "database", "apply_lanes": 4}
    assert "per database" in GUARANTEES[Consistency.DATABASE]


def test_executor_copy_threshold_and_local_cluster_memory() -> None:
    small = [_ref(100)] * 3
    assert not ExecutorCopy(min_bytes=1000, min_files=4).wants(small)
    assert ExecutorCopy(min_bytes=300, min_files=0).wants(small)
    assert ExecutorCopy(min_bytes=0, min_files=3).wants(small)
    assert not ExecutorCopy(min_bytes=0, min_files=0).wants(small * 100)
    assert executor_conf("local-cluster[2,1,768]") == {"spark.executor.memory": "576m"}
    assert executor_conf("local[2]") == {} and executor_conf("yarn") == {}


def _ref(size: int) -> FileRef:
    return FileRef(uri="file:///x/f", size=size)
