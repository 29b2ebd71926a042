"""Enrichment: what the agent adds to a decoded event before publishing it.

A target must be able to copy every file point-in-time without asking the source anything, so
each ``FileRef`` leaves the agent with a checksum (computed as sha256 of the current content if
the message had none), its algorithm, its size and its change-manager fallback (``cm_uri``), and
COMMIT_TXN carries the transaction's writes (read from TXN_WRITE_NOTIFICATION_LOG before the
metastore's cleaner removes them). Snapshots stay as the message has them: taking them from the
live metastore would show targets a later state than the event's. The exceptions are two kinds of
INSERT (``streamer.source.insert_files``): one that names no files (Hive 2.3's INSERT OVERWRITE) is
published as a replace by a listing of its object's directory, and one whose message carries no
snapshot (Hive 2.3's never do) gets its table and partition, both as the metastore has them when the
agent publishes (``--hms-uri``).

The change-manager fallback (``--cmroot``, for references that name no cmroot) is named as the
source's change manager names its copy. A reference that records a checksum but no cmroot is Hive
2.3's encoding (``uri#checksum``; Hive 3+ writes ``uri#checksum#cmroot#subdir``), and Hive
2.3's ``ReplChangeManager.getCMPath`` names the copy by the checksum alone: ``<cmroot>/<checksum>``,
the checksum being the hex of ``FileSystem.getFileChecksum``'s bytes, as after the ``#`` (cut to 254
characters when longer than the 255 of ``dfs.namenode.fs-limits.max-component-length``). One with a
subdir (Hive 3+'s ACID writes), or a checksum the agent computed (sha256: the bundled warehouse),
names ``<name>_<checksum>``, as Hive 3+ and that warehouse's change manager do.

The traversal and the per-file rules are pure; file I/O sits behind ``FileInspector``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from streamer import checksums
from streamer.errors import DecodeError
from streamer.events.model import CommitTxnPayload, Event, FileRef
from streamer.hive.decode import decode_txn_writes
from streamer.hive.files import cm_path
from streamer.source.insert_files import InsertResolver, Locator, drop_vanished, locator_for
from streamer.source.listing import filesystem_of as filesystem_of  # re-exported
from streamer.source.reader import NotificationReader
from streamer.source.renames import Renames

log = logging.getLogger(__name__)

COMPUTED_ALGORITHM = "sha256"
MAX_COMPONENT_LENGTH = 255  # dfs.namenode.fs-limits.max-component-length's default, as getCMPath reads it
LISTING_ATTEMPTS = 3  # a listing whose files vanish before they are read is made again, this often
T = TypeVar("T")
FROM_READER: Any = object()


@dataclass(frozen=True)
class EnrichSettings:
    """``checksum_algorithm`` names what the source filesystem's checksums are (e.g. ``sha256`` for
    the bundled warehouse, ``hdfs-md5-of-md5-of-crc32c`` for HDFS; see ``streamer.checksums``);
    ``cmroot`` is the source's change-manager root, used for references that do not name one
    (Hive 2.3)."""

    checksum_algorithm: str = COMPUTED_ALGORITHM
    cmroot: str | None = None
    compute_missing: bool = True


class FileInspector(Protocol):
    def size(self, uri: str) -> int | None:
        """Size in bytes, or None if the file does not exist (any more)."""
        ...

    def sha256(self, uri: str) -> str | None:
        """Hex sha256 of the content, or None if the file does not exist (any more)."""
        ...


class FsspecInspector:
    """``FileInspector`` over fsspec (local files here; HDFS/S3 with their fsspec drivers)."""

    def size(self, uri: str) -> int | None:
        fs, path = filesystem_of(uri)
        try:
            return int(fs.info(path)["size"])
        except FileNotFoundError:
            return None

    def sha256(self, uri: str) -> str | None:
        fs, path = filesystem_of(uri)
        digest = hashlib.sha256()
        try:
            with fs.open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        except FileNotFoundError:
            return None
        return digest.hexdigest()


def enrich_ref(ref: FileRef, settings: EnrichSettings, files: FileInspector) -> FileRef:
    """One reference with checksum, algorithm, size and cm fallback filled in where missing.

    A recorded checksum that cannot be a value of its algorithm (``--checksum-algorithm`` does not
    describe the source filesystem, or the message is damaged) raises ``checksums.ChecksumError``:
    published, it would only halt every target at this file.
    """
    checksum, algorithm = ref.checksum, ref.checksum_algorithm
    if checksum and not algorithm:
        algorithm = settings.checksum_algorithm
    if checksum and algorithm:
        try:
            checksums.check_value(algorithm, checksum)
        except checksums.ChecksumError as exc:
            raise checksums.ChecksumError(f"file {ref.uri}: {exc}") from exc
    if not checksum and settings.compute_missing:
        checksum = files.sha256(ref.uri)
        algorithm = COMPUTED_ALGORITHM if checksum else None
        if checksum is None:
            log.warning("file %s is gone and its event carries no checksum: it will be copied unverified "
                        "or not at all", ref.uri)
    # a size read now describes the file as it is now: only trustworthy with a checksum read now too
    size = ref.size if ref.size is not None or ref.checksum else files.size(ref.uri)
    cm_uri = ref.cm_uri
    if cm_uri is None and settings.cmroot:
        if ref.checksum and ref.subdir is None:  # Hive 2.3's `uri#checksum`
            cm_uri = hive2_cm_path(settings.cmroot, ref.checksum)
        elif ref.checksum:  # `uri#checksum##subdir`: only Hive 3+ writes a subdir
            cm_uri = cm_path(settings.cmroot, ref.uri, ref.checksum)
        elif checksum and settings.checksum_algorithm == COMPUTED_ALGORITHM:
            # a sha256 computed here names a copy only when that is the source's own algorithm
            cm_uri = cm_path(settings.cmroot, ref.uri, checksum)
    return dataclasses.replace(ref, checksum=checksum, checksum_algorithm=algorithm, size=size, cm_uri=cm_uri)


def hive2_cm_path(cmroot: str, checksum: str) -> str:
    """Where Hive 2.3's change manager keeps a file whose checksum string is ``checksum``
    (``ReplChangeManager.getCMPath``: the checksum alone, cut to fit one HDFS path component)."""
    name = checksum if len(checksum) <= MAX_COMPONENT_LENGTH else checksum[: MAX_COMPONENT_LENGTH - 1]
    return f"{cmroot.rstrip('/')}/{name}"


def map_refs(value: T, fn: Callable[[FileRef], FileRef]) -> T:
    """``value`` with ``fn`` applied to every ``FileRef`` inside it (dataclasses and lists)."""
    result: Any = _map(value, fn)
    return result


def _map(value: Any, fn: Callable[[FileRef], FileRef]) -> Any:
    if isinstance(value, FileRef):
        return fn(value)
    if isinstance(value, list):
        return [_map(v, fn) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            current = getattr(value, f.name)
            if isinstance(current, FileRef | list) or dataclasses.is_dataclass(current):
                new = _map(current, fn)
                if new is not current:
                    changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


class Enricher:
    """Applies the enrichment to decoded events; reads ACID write lists through the reader, and
    resolves INSERTs without files through ``locator`` (by default the metastore the reader reads
    through, if any: ``insert_files.locator_for``)."""

    def __init__(self, settings: EnrichSettings, reader: NotificationReader,
                 files: FileInspector | None = None, locator: Locator | None = FROM_READER) -> None:
        self.settings = settings
        self.reader = reader
        self.files = files or FsspecInspector()
        locator = locator_for(reader) if locator is FROM_READER else locator
        renames = Renames(reader).current if reader is not None and locator is not None else None
        self.inserts = InsertResolver(locator, renames=renames)

    def __call__(self, event: Event) -> Event:
        event = self._with_writes(event)
        for _ in range(LISTING_ATTEMPTS):
            try:
                resolved, listed = self.inserts(event)
            except OSError as exc:
                raise DecodeError(f"cannot list the directory of the event's object: {exc}",
                                  event_id=event.event_id, event_type=event.event_type.value,
                                  obj=_obj(event)) from exc
            enriched = enrich_event(resolved, self.settings, self.files)
            if not listed or not self.settings.compute_missing or drop_vanished(enriched) is enriched:
                return enriched
            log.info("event %d: files of the listing of %s vanished before they were read; listing again",
                     event.event_id, _obj(event))
        return drop_vanished(enriched)

    def close(self) -> None:
        """Closes the metastore connection a resolution opened (the reader is the caller's)."""
        self.inserts.close()

    def _with_writes(self, event: Event) -> Event:
        payload = event.payload
        if isinstance(payload, CommitTxnPayload) and not payload.writes:
            try:
                writes = decode_txn_writes(self.reader.txn_writes(payload.txn_id))
            except DecodeError as exc:
                raise DecodeError(f"writes of txn {payload.txn_id}: {exc.cause}", event_id=event.event_id,
                                  event_type=event.event_type.value, obj=exc.obj) from exc
            if writes:
                event = dataclasses.replace(event, payload=dataclasses.replace(payload, writes=writes))
        return event


def enrich_event(event: Event, settings: EnrichSettings, files: FileInspector) -> Event:
    """Every file reference of ``event`` enriched; a failure is a ``DecodeError`` naming the event."""
    try:
        return map_refs(event, lambda ref: enrich_ref(ref, settings, files))
    except OSError as exc:
        raise DecodeError(f"cannot inspect a file of the event: {exc}", event_id=event.event_id,
                          event_type=event.event_type.value, obj=_obj(event)) from exc
    except checksums.ChecksumError as exc:
        raise DecodeError(f"{exc} (is --checksum-algorithm {settings.checksum_algorithm} what the source "
                          "filesystem records?)", event_id=event.event_id, event_type=event.event_type.value,
                          obj=_obj(event)) from exc


def _obj(event: Event) -> str | None:
    return ".".join(n for n in (event.db, event.table) if n) or None
