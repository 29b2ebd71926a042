"""Check that streamer's runtime dependencies are complete: run it where only `pip install .` went in.

Imports every module of the `streamer` package and opens every filesystem streamer offers (see
streamer/filesystems.py: file, s3 and s3a, hdfs through WebHDFS, webhdfs, and the libhdfs driver's
class), so that a dependency that only the dev extras bring in (e.g. `requests`, which fsspec's
WebHDFS needs) fails here, loudly, instead of in production. Opening needs no server: a filesystem
object is built, nothing is read. Exit status 1 names every failure.

    python scripts/check_runtime.py        # with the interpreter of the runtime-only environment
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback
from collections.abc import Callable

# Filesystems streamer offers, by the URL a user would give (streamer.filesystems.url_to_fs).
URLS = [
    "/tmp/streamer-check-runtime",
    "file:///tmp/streamer-check-runtime",
    "s3://streamer-check-runtime/warehouse",
    "s3a://streamer-check-runtime/warehouse",
    "hdfs://namenode.invalid:8020/warehouse",  # WebHDFS: the default where libhdfs is not installed
    "webhdfs://namenode.invalid:9870/warehouse",
]


def import_every_module() -> list[str]:
    import streamer

    failures: list[str] = []

    def failed(name: str) -> None:
        failures.append(f"import {name}: {traceback.format_exc(limit=3)}")

    print(f"check_runtime: streamer from {streamer.__path__[0]}, Python {sys.executable}")
    names = [m.name for m in pkgutil.walk_packages(streamer.__path__, "streamer.", onerror=failed)]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:
            failed(name)
    print(f"check_runtime: imported {len(names) + 1 - len(failures)} of {len(names) + 1} modules")
    return failures


def open_every_filesystem() -> list[str]:
    from streamer.filesystems import FsSettings, configure, url_to_fs

    failures: list[str] = []
    checks: list[tuple[str, Callable[[], object]]] = []
    configure(FsSettings(hdfs_driver="auto"))
    for url in URLS:
        checks.append((url, lambda url=url: url_to_fs(url)[0]))
    # --hdfs-driver libhdfs: pyarrow's HadoopFileSystem; building one needs libhdfs, its class does not
    checks.append(("hdfs (libhdfs driver)", lambda: _fsspec_class("hdfs")))
    for what, check in checks:
        try:
            fs = check()
        except Exception:
            failures.append(f"open {what}: {traceback.format_exc(limit=3)}")
        else:
            print(f"check_runtime: {what}: {getattr(fs, '__name__', type(fs).__name__)}")
    return failures


def _fsspec_class(protocol: str) -> type:
    import fsspec

    return fsspec.get_filesystem_class(protocol)


def main() -> int:
    failures = import_every_module() + open_every_filesystem()
    for failure in failures:
        print(f"check_runtime: FAILED {failure}", file=sys.stderr)
    if failures:
        hint = "a runtime dependency missing from pyproject.toml's `dependencies`?"
        print(f"check_runtime: {len(failures)} failure(s): {hint}", file=sys.stderr)
        return 1
    print("check_runtime: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
