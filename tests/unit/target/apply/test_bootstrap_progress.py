"""The bootstrap's progress file is a state file like the others: changed under the state dir's lock
(a stale copy never erases another writer's record) and refused, naming the file, when malformed."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.target.apply.bootstrap import PROGRESS_FILE, BootstrapProgress
from streamer.target.state.files import StateFileError


def test_a_stale_copy_keeps_what_another_writer_recorded(tmp_path: Path) -> None:
    first, stale = BootstrapProgress(tmp_path), BootstrapProgress(tmp_path)
    first.record(7, 40)
    stale.record(9, 3)  # loaded before 7 was recorded
    stale.record(7, 12)  # behind what the file already says
    again = BootstrapProgress(tmp_path)
    assert (again.applied_through(7), again.applied_through(9)) == (40, 3)


@pytest.mark.parametrize("body", ["[]", "null", '{"7": "x"}', '{"seven": 1}', '{"7": true}', "{"])
def test_a_malformed_file_is_a_state_file_error_naming_it(tmp_path: Path, body: str) -> None:
    (tmp_path / PROGRESS_FILE).write_text(body, encoding="utf-8")
    with pytest.raises(StateFileError, match=PROGRESS_FILE):
        BootstrapProgress(tmp_path)
