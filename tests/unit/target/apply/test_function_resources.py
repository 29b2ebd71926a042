"""Function resources copied into the target's functions dir, and removed with the function."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.errors import PathEscapeError
from streamer.events.model import FunctionSnapshot, ResourceUri
from streamer.target.apply.files import FileCopier
from streamer.target.apply.function_resources import copy_resources, remove_resources, resource_dir
from streamer.target.apply.paths import TargetPaths


def test_resources_are_copied_renamed_and_removed(tmp_path: Path) -> None:
    paths = TargetPaths((tmp_path / "wh").as_uri())
    jar = tmp_path / "src" / "u.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"jar bytes")
    fn = FunctionSnapshot("up", "db", "com.x.Up", resource_uris=[ResourceUri("JAR", f"file:{jar}")])
    copied = copy_resources(fn, paths, FileCopier(roots=paths.roots), event_id=7)
    (res,) = copied.resource_uris
    assert res == ResourceUri("JAR", resource_dir(paths, "db", "up") + "/u.jar")
    target = tmp_path / "wh" / "_functions" / "db" / "up" / "u.jar"
    assert target.read_bytes() == b"jar bytes"
    assert copy_resources(copied.__class__("f", "db", "C"), paths, FileCopier()).resource_uris == []
    remove_resources(paths, "db", "up")
    assert not target.parent.exists()
    remove_resources(paths, "db", "up")  # a replay: absent is fine


def test_bad_resource_names_are_refused(tmp_path: Path) -> None:
    paths = TargetPaths((tmp_path / "wh").as_uri())
    twice = [ResourceUri("JAR", "file:/a/u.jar"), ResourceUri("JAR", "file:/b/u.jar")]
    with pytest.raises(PathEscapeError, match="named alike"):
        copy_resources(FunctionSnapshot("f", "db", "C", resource_uris=twice), paths, FileCopier())
    with pytest.raises(PathEscapeError):
        resource_dir(paths, "..", "f")
