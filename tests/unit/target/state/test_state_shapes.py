"""Every state file loader either loads a JSON value or raises ``StateFileError`` naming the file;
every state file writer replaces its file with a unique temp name, fsyncs it and its directory."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.target.dr.failback import FAILBACK_FILE, read_failbacks
from streamer.target.dr.failover import FAILOVER_FILE, FailoverRecord, read_record, write_record
from streamer.target.state.chain import CHAIN_FILE, Anchor, read_anchor, write_anchor
from streamer.target.state.files import StateFileError
from streamer.target.state.state_file import STATE_FILE, TargetState
from streamer.target.state.status import (
    MODE_FILE,
    PROGRESS_FILE,
    read_mode,
    read_progress,
    write_mode,
    write_progress,
)

LOADERS: dict[str, Callable[[Path], Any]] = {
    STATE_FILE: TargetState,
    CHAIN_FILE: read_anchor,
    PROGRESS_FILE: read_progress,
    MODE_FILE: read_mode,
    FAILOVER_FILE: read_record,
    FAILBACK_FILE: read_failbacks,
}

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
_keys = st.sampled_from(["halts", "skips", "applied", "replay_from", "db", "event_id", "cause", "time",
                         "offset", "topic", "databases", "consumed_event_id", "event_time", "consistency",
                         "apply_lanes", "state", "started", "cut", "changed", "source_ids", "a"])
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=5),
    max_leaves=12,
)

WRONG_SHAPES: list[Any] = [[], None, "x", 3, {"applied": []}, {"halts": [{"db": "a", "event_id": "5"}]},
                {"halts": {}}, {"offset": "5", "topic": "t", "event_id": 1}, {"databases": []},
                {"databases": {"a": {"event_id": "x"}}}, {"state": "done"}, [1]]


@pytest.mark.parametrize("name", sorted(LOADERS))
@pytest.mark.parametrize("body", WRONG_SHAPES, ids=repr)
def test_wrong_shapes_named_in_a_typed_error(tmp_path: Path, name: str, body: Any) -> None:
    (tmp_path / name).write_text(json.dumps(body))
    try:
        LOADERS[name](tmp_path)
    except StateFileError as exc:
        assert name in str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(LOADERS)), body=json_values)
def test_any_json_value_loads_or_is_a_state_file_error(name: str, body: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / name).write_text(json.dumps(body))
        try:
            LOADERS[name](Path(tmp))
        except StateFileError as exc:
            assert name in str(exc)


def test_the_shapes_of_the_issue_are_refused(tmp_path: Path) -> None:
    bodies: list[Any] = [[], None, {"applied": []}]
    for body in bodies:
        (tmp_path / STATE_FILE).write_text(json.dumps(body))
        with pytest.raises(StateFileError, match=STATE_FILE):
            TargetState(tmp_path)
    (tmp_path / CHAIN_FILE).write_text(json.dumps({"topic": "t", "offset": "5", "event_id": 1}))
    with pytest.raises(StateFileError, match="offset must be an integer"):
        read_anchor(tmp_path)


WRITERS: dict[str, Callable[[Path], None]] = {
    STATE_FILE: lambda d: TargetState(d).record_applied("a", time.monotonic_ns()),
    CHAIN_FILE: lambda d: write_anchor(d, Anchor("t", 1, 2)),
    PROGRESS_FILE: lambda d: write_progress(d, {"a": (1, 2)}, 3),
    MODE_FILE: lambda d: write_mode(d, "global", 1),
    FAILOVER_FILE: lambda d: write_record(d, FailoverRecord("pending", "now")),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_writers_fsync_a_unique_temp_file_and_the_directory(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    replaced: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        replaced.append(str(src))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    WRITERS[name](tmp_path)
    WRITERS[name](tmp_path)
    temps = [r for r in replaced if Path(r).name.startswith(f".{name}.")]
    assert len(temps) >= 2 and len(set(temps)) == len(temps)  # a fresh temp name per write
    assert any(Path(s).name.startswith(f".{name}.") for s in synced)  # the content, before the rename
    assert str(tmp_path) in synced  # the rename itself made durable
    assert (tmp_path / name).exists() and not list(tmp_path.glob(f".{name}.*"))
