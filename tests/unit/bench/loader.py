"""The benchmark scripts as modules: bench/ holds scripts, not a package, so the tests load them by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[3] / "bench"


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` as module ``bench_<name>``: registered in ``sys.modules`` (dataclasses look
    their module up), with bench/ on the path while it runs (the scripts import their siblings)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module
