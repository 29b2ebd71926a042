"""The archive directory: files and manifest, on a local path, ``hdfs://`` or ``s3a://``.

Exactly once across crashes: a file is written under a temporary name, flushed to disk and renamed
(an object store's single PUT is atomic already), and only then is the manifest replaced with one
that names it, in one atomic step. A crash before the manifest leaves a file no entry names: it is
removed when the archiver starts again and its records are archived again. On a local path the
manifest is replaced by rename after fsync (``streamer.filesystems.atomic_write``); on HDFS, whose
rename does not replace, the new manifest is written beside it, the old one removed and the new one
renamed: a reader that finds none reads the one beside it.
"""

from __future__ import annotations

import logging
import posixpath
from pathlib import Path
from urllib.parse import unquote, urlsplit

from streamer.archive.manifest import FILE_PATTERN, MANIFEST_NAME, ArchiveError, Manifest, from_json, to_json
from streamer.filesystems import atomic_rename, atomic_write, url_to_fs

log = logging.getLogger(__name__)

PENDING_MANIFEST = f".{MANIFEST_NAME}.new"


class ArchiveStore:
    """The files of one archive directory ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url
        parts = urlsplit(url)
        self._local: Path | None = None
        if parts.scheme in ("", "file"):
            self._local = Path(unquote(parts.path) if parts.scheme == "file" else url)
        self.fs, self.root = url_to_fs(url)
        self._atomic_rename = atomic_rename(url)

    def path(self, name: str) -> str:
        return str(self._local / name) if self._local is not None else posixpath.join(self.root, name)

    def ensure(self) -> None:
        if self._local is not None:
            self._local.mkdir(parents=True, exist_ok=True)
        else:
            self.fs.makedirs(self.root, exist_ok=True)

    # --- the manifest ---

    def read_manifest(self) -> Manifest | None:
        """The manifest, or None for an archive nothing was written to yet."""
        for name in (MANIFEST_NAME, PENDING_MANIFEST):
            path = self.path(name)
            if self.fs.exists(path):
                return from_json(self.fs.cat_file(path), f"{self.url}/{name}")
        return None

    def write_manifest(self, manifest: Manifest) -> None:
        data = to_json(manifest)
        if self._local is not None:
            atomic_write(self._local / MANIFEST_NAME, data)
        elif not self._atomic_rename:
            self.fs.pipe_file(self.path(MANIFEST_NAME), data)  # one PUT: the old object or the new one
        else:
            pending = self.path(PENDING_MANIFEST)
            self.fs.pipe_file(pending, data)
            if self.fs.exists(self.path(MANIFEST_NAME)):
                self.fs.rm_file(self.path(MANIFEST_NAME))
            self.fs.mv(pending, self.path(MANIFEST_NAME))

    # --- the files ---

    def write_file(self, name: str, data: bytes) -> None:
        """Write ``name`` whole, or leave nothing under that name (a temporary file at most)."""
        if self._local is not None:
            atomic_write(self._local / name, data)
        elif not self._atomic_rename:
            self.fs.pipe_file(self.path(name), data)
        else:
            tmp = self.path(f".{name}.tmp")
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, self.path(name))

    def read_file(self, name: str) -> bytes:
        try:
            data = self.fs.cat_file(self.path(name))
        except FileNotFoundError as exc:
            raise ArchiveError(f"{self.url}: archive file {name} is missing") from exc
        return bytes(data)

    def remove_orphans(self, manifest: Manifest | None) -> list[str]:
        """Remove archive files and temporary files no manifest entry names (a crash between a file
        and its manifest); returns their names."""
        named = {e.file for e in manifest.files} if manifest is not None else set()
        removed = []
        for path in self.fs.ls(self.root, detail=False) if self.fs.exists(self.root) else []:
            name = posixpath.basename(str(path).rstrip("/"))
            orphan = FILE_PATTERN.match(name) and name not in named
            temporary = name.startswith(".events-") or (name.startswith(f".{MANIFEST_NAME}.") and
                                                        name != PENDING_MANIFEST)
            if orphan or temporary:
                log.warning("archive %s: removing %s, which no manifest entry names (an interrupted write)",
                            self.url, name)
                self.fs.rm_file(self.path(name))
                removed.append(name)
        return removed
