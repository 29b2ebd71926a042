"""What an object's directory holds now: its visible data files, as Hive's readers see them.

Used where a source's files are known only by listing: a bootstrap dump of a Hive Metastore
(``streamer.source.hms_source_catalog``) and INSERTs whose event does not name its files
(``streamer.source.insert_files``). Hidden names (``_``/``.`` prefixed: ``_SUCCESS``, ``.crc`` files,
``_tmp``/``.hive-staging`` directories) and everything below them are skipped, as
``FileUtils.HIDDEN_FILES_PATH_FILTER`` skips them. Files come without checksums: enrichment reads them.
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import urlsplit

from streamer.events.model import FileRef
from streamer.hive.files import is_hidden


def filesystem_of(uri: str) -> tuple[Any, str]:
    """fsspec filesystem and path of a file URI; Hadoop's ``file:/path`` spelling accepted."""
    from streamer.filesystems import url_to_fs

    if uri.startswith("file:") and not uri.startswith("file://"):
        uri = "file://" + uri[len("file:"):]  # Hadoop writes file:/path
    fs, path = url_to_fs(uri)
    return fs, path


def _uri(location: str, root: str, fs: Any, path: str) -> str:
    """The file's URI in the location's own spelling (``file://`` + path for local files:
    ``Path.as_uri()`` would encode ``=`` in ``dt=...`` directories). Elsewhere the location's scheme
    and authority are kept (``s3a://bucket``, ``hdfs://nameservice``): the filesystem's own spelling
    may differ (s3fs says ``s3``, WebHDFS drops the namenode)."""
    scheme = urlsplit(location).scheme or "file"
    if scheme == "file":
        return "file://" + path
    base = root.rstrip("/")
    if path == base or path.startswith(base + "/"):
        return location.rstrip("/") + path[len(base):]
    return str(fs.unstrip_protocol(path))


def list_files(location: str | None, partition: str | None = None) -> list[FileRef]:
    """Every visible data file below ``location`` (recursively, hidden names and what is below them
    skipped), sorted by URI; a missing location holds no files."""
    return [ref for ref, _ in list_entries(location, partition)]


MTIME_KEYS = ("mtime", "modificationTime", "LastModified", "last_modified", "updated", "created")
"""Where fsspec filesystems put a file's modification time (local, WebHDFS, S3, Azure, GCS)."""


def list_entries(location: str | None, partition: str | None = None) -> list[tuple[FileRef, object]]:
    """``list_files`` with each file's modification time as its filesystem reports it (None when it
    reports none): what a listing is compared by, with names and sizes (``streamer.source.watch``)."""
    if not location:
        return []
    fs, root = filesystem_of(location)
    out: list[tuple[FileRef, object]] = []
    pending = [root.rstrip("/") or "/"]
    while pending:
        directory = pending.pop()
        try:
            entries = fs.ls(directory, detail=True)
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            entries = [fs.info(directory)]
        for entry in entries:
            path = str(entry["name"]).rstrip("/")
            if path == directory and entry.get("type") == "directory":
                continue  # some filesystems list the directory itself
            if is_hidden(posixpath.basename(path)):
                continue
            if entry.get("type") == "directory":
                pending.append(path)
            else:
                size = entry.get("size")
                mtime = next((entry[k] for k in MTIME_KEYS if entry.get(k) is not None), None)
                ref = FileRef(uri=_uri(location, root, fs, path),
                              size=int(size) if size is not None else None, partition=partition)
                out.append((ref, mtime))
    return sorted(out, key=lambda pair: pair[0].uri)


def exists(location: str) -> bool:
    """Whether ``location`` names an existing directory (or file)."""
    fs, path = filesystem_of(location)
    return bool(fs.exists(path))
