"""The repository holds all it needs: no file reads or names a path outside the clone.

A fresh machine has only the repository. A path into the workspace the project was developed in (the
``work`` directory at the root), into a sibling tree (``shared`` next to the clone) or into a user's home
directory works on one machine and fails, or silently skips, on every other. Test data lives under
``tests/fixtures/``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ["streamer", "tests", "bench", "scripts", ".ci", "Makefile", "pyproject.toml"]
SKIPPED_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis"}
# Each pattern is written so that it does not match its own source text.
OUTSIDE = {
    "a path under the development workspace": re.compile(r"(?<![\w.-])/wor[k]/"),
    "a sibling tree (the shared one)": re.compile(r"(?:\.\./)+share[d]\b"),
    "a user's home directory": re.compile(r"(?<![\w.~-])/(?:hom[e]|User[s])/[\w.-]+"),
}


def _text_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        for path in candidates:
            rel = path.relative_to(ROOT).parts
            if not path.is_file() or any(p in SKIPPED_DIRS or p.endswith(".egg-info") for p in rel):
                continue
            files.append(path)
    return files


def _lines(path: Path) -> list[str]:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return []  # binary
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return []


def outside_paths() -> list[str]:
    """``file:line: what: text`` for every mention of a path outside the repository."""
    found = []
    own = re.compile(re.escape(str(ROOT)) + r"(?:/|\b)")  # the clone's own absolute location
    for path in _text_files():
        for number, line in enumerate(_lines(path), 1):
            hits = [what for what, pattern in OUTSIDE.items() if pattern.search(line)]
            if own.search(line):
                hits.append("the clone's absolute location (use a path relative to the repository)")
            found += [f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()}" for what in hits]
    return found


def test_the_scan_sees_the_tree() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _text_files()}
    expected = {"streamer/cli.py", "tests/unit/test_repo_paths.py", "tests/fixtures/hive-messages/README.md"}
    assert expected <= names


def test_the_patterns_catch_what_they_name() -> None:
    work, shared, home = "/wor" + "k/shared/x", "../../" + "shared/x", "/hom" + "e/alice/x"
    assert OUTSIDE["a path under the development workspace"].search(f'Path("{work}")')
    assert OUTSIDE["a sibling tree (the shared one)"].search(f"open('{shared}')")
    assert OUTSIDE["a user's home directory"].search(f"cd {home}")
    fine = "~/.cache/streamer /usr/share/java /tmp/x s3://bucket/work/"
    assert not any(p.search(fine) for p in OUTSIDE.values())


def test_no_path_outside_the_repository() -> None:
    found = outside_paths()
    assert not found, "paths outside the repository (copy what is needed into it):\n" + "\n".join(found)
