"""A table during a replay: mutable files per partition, turned into a :class:`TableState` on demand.

Also how a replay names tables (``table_key``) and files within a partition (``file_key``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from streamer.events.model import FileRef, TableSnapshot
from streamer.hive.files import partition_name
from streamer.replay.state import UNPARTITIONED, FileKey, TableMeta, TableState, table_meta, table_state


def table_key(db: str, table: str) -> str:
    """How the checker names a table: ``db.table`` in lower case (as the metastore stores names)."""
    return f"{db.lower()}.{table.lower()}"


def file_key(ref: FileRef, base_location: str | None) -> FileKey:
    """A file's identity within its partition: path relative to the partition (or table) directory.

    Falls back to ``subdir/name`` (ACID deltas) or the bare name when the file lies elsewhere.
    """
    path = urlsplit(ref.uri).path
    if base_location:
        base = urlsplit(base_location).path.rstrip("/") + "/"
        if path.startswith(base):
            return path[len(base) :], ref.checksum or ""
    name = posixpath.basename(path)
    return (f"{ref.subdir.strip('/')}/{name}" if ref.subdir else name), ref.checksum or ""


@dataclass
class LiveTable:
    """A table during the replay: mutable, turned into a :class:`TableState` after each change."""

    meta: TableMeta
    location: str | None
    files: dict[str, dict[str, str]] = field(default_factory=dict)  # partition -> path -> checksum
    locations: dict[str, str | None] = field(default_factory=dict)
    write_ids: set[int] = field(default_factory=set)  # committed, for transactional tables
    # (partition, relative path) -> the reference that put the file there (sizes, algorithms, cm
    # copies: what verification and repair need; entries of removed files may linger, unread)
    refs: dict[tuple[str, str], FileRef] = field(default_factory=dict)

    @classmethod
    def of(cls, table: TableSnapshot) -> LiveTable:
        live = cls(table_meta(table), table.sd.location)
        if not live.meta.is_view and not live.meta.partition_keys:
            live.files[UNPARTITIONED] = {}
        return live

    def state(self) -> TableState:
        return table_state(self.meta, {p: files.items() for p, files in self.files.items()}, self.write_ids)

    def partition(self, name: str, location: str | None = None) -> dict[str, str]:
        if location:
            self.locations[name] = location
        return self.files.setdefault(name, {})

    def base(self, name: str) -> str | None:
        return self.locations.get(name) if name != UNPARTITIONED else self.location

    def add(self, name: str, refs: Iterable[FileRef], base: str | None = None) -> None:
        files = self.partition(name)
        for ref in refs:
            path, checksum = file_key(ref, base or self.base(name))
            files[path] = checksum
            self.refs[(name, path)] = ref

    def ref(self, name: str, path: str) -> FileRef | None:
        """The reference of a file the table holds now (None when it holds no such file)."""
        return self.refs.get((name, path)) if path in self.files.get(name, {}) else None

    def name(self, values: Sequence[str]) -> str:
        """The Hive partition name of ``values`` (``UNPARTITIONED`` for none)."""
        return partition_name(self.meta.key_names, list(values)) if values else UNPARTITIONED

    def drop_partitions(self, partition_values: list[list[str]]) -> None:
        for values in partition_values:
            self.files.pop(self.name(values), None)

    def add_files(self, names: Sequence[str], refs: Iterable[FileRef]) -> None:
        """Files of an event that adds partitions ``names``: each into the partition it names, else
        into the only one added."""
        for ref in refs:
            self.add(ref.partition or (names[0] if len(names) == 1 else UNPARTITIONED), [ref])
