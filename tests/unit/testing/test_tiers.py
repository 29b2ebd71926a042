"""The collection check that keeps every service test marked (tests/fixtures/tiers.py)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.tiers import unmarked_service_files


def test_an_unmarked_test_under_a_service_folder_is_named(tmp_path: Path) -> None:
    root = tmp_path / "tests"
    tests = [
        (root / "integration" / "kafka" / "test_a.py", True),
        (root / "integration" / "kafka" / "test_b.py", False),
        (root / "integration" / "kafka" / "test_b.py", True),
        (root / "e2e" / "test_demo.py", False),
        (root / "unit" / "test_pure.py", False),  # unit tests need no marker
        (tmp_path / "elsewhere" / "test_x.py", False),  # outside the suite
    ]
    assert unmarked_service_files(tests, root) == [
        "tests/e2e/test_demo.py", "tests/integration/kafka/test_b.py",
    ]


def test_a_fully_marked_suite_passes(tmp_path: Path) -> None:
    root = tmp_path / "tests"
    assert unmarked_service_files([(root / "integration" / "test_a.py", True)], root) == []
