"""Which filesystem a URL names, opened through fsspec with the operator's settings.

Every file the agent reads and the target writes goes through ``url_to_fs``: local paths, ``s3://``
and ``s3a://`` (s3fs), ``hdfs://`` (libhdfs, else WebHDFS) and ``webhdfs://``. Settings are
process-wide (``configure`` once at start-up). How each scheme is served: docs/design/consistency.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import fsspec
import fsspec.config
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs as _fsspec_url_to_fs

from streamer.errors import ConfigError

log = logging.getLogger(__name__)

HDFS_DRIVERS = ("auto", "libhdfs", "webhdfs")
WEBHDFS_DEFAULT_PORT = 9870  # the namenode's HTTP port since Hadoop 3 (50070 before)
# protocols an option may name; s3a shares s3's options (one store, two names)
OPTION_PROTOCOLS = ("s3", "webhdfs", "hdfs", "file")
_ALIASES = {"s3a": "s3"}
_SECRET_WORDS = ("secret", "password", "token", "key", "credential")
# schemes whose "rename" is a copy and a delete: several files never appear at once
_NON_ATOMIC_RENAME = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "oss", "r2"})


@dataclass(frozen=True)
class FsSettings:
    """Storage options per protocol (fsspec keyword arguments) and how ``hdfs://`` is served."""

    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    hdfs_driver: str = "auto"

    def __post_init__(self) -> None:
        if self.hdfs_driver not in HDFS_DRIVERS:
            raise ConfigError(f"--hdfs-driver: {self.hdfs_driver!r} is not one of {', '.join(HDFS_DRIVERS)}")

    def masked(self) -> dict[str, Any]:
        """The settings as they may be printed or logged: secret-looking values become ``*****``."""
        return {"options": {p: _mask(o) for p, o in self.options.items()}, "hdfs_driver": self.hdfs_driver}

    def __repr__(self) -> str:
        return f"FsSettings({self.masked()})"


def _mask(options: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, Mapping):
            out[key] = _mask(value)
        elif any(word in key.lower() for word in _SECRET_WORDS):
            out[key] = "*****"
        else:
            out[key] = value
    return out


def parse_fs_options(pairs: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``PROTOCOL.KEY=VALUE`` pairs into per-protocol storage options.

    A dotted key nests (``s3.client_kwargs.region_name=eu-west-1``); a value that reads as JSON
    (``true``, ``9870``, ``{"a": 1}``) is taken as that, anything else as a string. ``s3a`` options
    are ``s3`` options. Unknown protocols are refused by name.
    """
    out: dict[str, dict[str, Any]] = {}
    for item in pairs:
        key, found, raw = item.partition("=")
        protocol, dot, rest = key.strip().partition(".")
        protocol = _ALIASES.get(protocol.lower(), protocol.lower())
        if not found or not dot or not rest or any(not part for part in rest.split(".")):
            raise ConfigError(
                f"--fs-option: expected PROTOCOL.KEY=VALUE (e.g. s3.endpoint_url=...), got {item!r}"
            )
        if protocol not in OPTION_PROTOCOLS:
            raise ConfigError(
                f"--fs-option {key}: unknown protocol {protocol!r} "
                f"(allowed: {', '.join(OPTION_PROTOCOLS)}, s3a)"
            )
        target = out.setdefault(protocol, {})
        *parents, last = rest.split(".")
        for parent in parents:
            child = target.setdefault(parent, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--fs-option {key}: {parent} is already set to a value")
            target = child
        target[last] = _value(raw.strip())
    return out


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


_settings = FsSettings()


def configure(settings: FsSettings) -> None:
    """Make ``settings`` the process's filesystem settings (once, at a command's start)."""
    global _settings
    _settings = settings
    for protocol, options in settings.options.items():
        if protocol in ("hdfs", "webhdfs"):
            continue  # applied by ``url_to_fs`` itself (the hdfs mapping needs them)
        fsspec.config.conf.setdefault(protocol, {}).update(options)
    if settings.options:
        log.info("filesystem settings: %s", settings.masked())


def current_settings() -> FsSettings:
    """The settings ``url_to_fs`` resolves with in this process, to hand to another process (a Spark
    executor's Python worker) that must resolve URLs the same way."""
    return _settings


# --- hdfs -----------------------------------------------------------------------------------------


def libhdfs_path(env: Mapping[str, str]) -> Path | None:
    """Where pyarrow loads ``libhdfs.so`` from (``ARROW_LIBHDFS_DIR``, ``HADOOP_HOME``), if it is there."""
    candidates = []
    if env.get("ARROW_LIBHDFS_DIR"):
        candidates.append(Path(env["ARROW_LIBHDFS_DIR"]) / "libhdfs.so")
    if env.get("HADOOP_HOME"):
        candidates.append(Path(env["HADOOP_HOME"]) / "lib" / "native" / "libhdfs.so")
    return next((c for c in candidates if c.is_file()), None)


def choose_hdfs_driver(requested: str, libhdfs: Path | None) -> str:
    """``libhdfs`` or ``webhdfs``: ``auto`` takes libhdfs when it is installed (pure)."""
    if requested == "auto":
        return "libhdfs" if libhdfs is not None else "webhdfs"
    return requested


def webhdfs_arguments(url: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """WebHDFS keyword arguments and path for an ``hdfs://`` or ``webhdfs://`` URL (pure).

    The namenode's HTTP address is ``webhdfs.host``/``webhdfs.port`` when set (an HA nameservice in
    the URL is no host), else the URL's host and ``webhdfs.port`` or 9870. The user comes from the
    URL (``hdfs://user@nn/``) or ``webhdfs.user``.
    """
    parts = urlsplit(url)
    kwargs: dict[str, Any] = dict(options)
    if parts.hostname and "host" not in kwargs:
        kwargs["host"] = parts.hostname
    if "host" not in kwargs:
        raise ConfigError(f"{url}: no namenode host; name one in the URL or --fs-option webhdfs.host=...")
    kwargs.setdefault("port", WEBHDFS_DEFAULT_PORT)
    if parts.username and "user" not in kwargs and not kwargs.get("kerberos"):  # kinit's user then
        kwargs["user"] = parts.username
    return kwargs, parts.path or "/"


def url_to_fs(url: str) -> tuple[AbstractFileSystem, str]:
    """The filesystem of ``url`` and the path on it, by the rules in this module's docstring."""
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("hdfs", "webhdfs"):
        driver = "webhdfs" if scheme == "webhdfs" else choose_hdfs_driver(
            _settings.hdfs_driver, libhdfs_path(os.environ))
        if driver == "webhdfs":
            kwargs, path = webhdfs_arguments(url, _settings.options.get("webhdfs", {}))
            return fsspec.filesystem("webhdfs", **kwargs), path
        return _fsspec_url_to_fs(url, **dict(_settings.options.get("hdfs", {})))
    if same_store(scheme) == "s3" and "use_listings_cache" not in fsspec.config.conf.get("s3", {}):
        # a cached listing would hide files written by others (the source, the external sync's
        # next cycle); s3fs keeps its own writes consistent either way
        return _fsspec_url_to_fs(url, use_listings_cache=False)
    return _fsspec_url_to_fs(url)


def atomic_rename(url: str) -> bool:
    """Whether a file renamed on ``url``'s filesystem appears at once (local, HDFS) or is copied and
    deleted (object stores)."""
    return urlsplit(url).scheme.lower() not in _NON_ATOMIC_RENAME


def same_store(scheme: str) -> str:
    """The scheme a store is known by: ``s3a`` and ``s3`` are one store."""
    scheme = scheme.lower()
    return _ALIASES.get(scheme, scheme)


def atomic_write(path: str | Path, data: bytes) -> None:
    """Replace local file ``path`` with ``data``: unique temp file, fsync, rename, fsync of the directory
    (a crash leaves the old file or the new one, never a torn one; state and work files use it)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
