"""``streamer dump --policy ... --to DIR`` (Hive's REPL DUMP): a consistent bootstrap of a source and
the source's events after it, written as an event archive that ``streamer load --from DIR`` applies
with no broker.

The dump holds, in order: the records ``streamer bootstrap`` would publish (the objects of the policy
as of one event id E, then the BOOTSTRAP_END marker); the notification log's events after E up to its
head as read once the bootstrap is read (or up to ``--until-event N``), each decoded, enriched,
policy-filtered and encoded by the source agent's own ``Preparer`` (``streamer.source.prepare``), as
the agent would publish them after that bootstrap; then one PROGRESS record claiming the last event
id the dump passed (published or filtered), never more than it holds. Every record names the one
before it (``prev_event_id``; the first names none) and is written with the archive's writer
(``streamer.archive.archiver.append``). There is no Kafka: the dump numbers its records 0..n-1 and
these are the "offsets" of its manifest. The agent's watch of tables whose writers log nothing
(``streamer.source.watch``) is not part of a dump: their later writes are in no log.

``--with-data`` (``DataCopier``) copies each data file the records name (bootstrap and events) into
``DIR/data/<sha256 of its URI and checksum>/<name>``, verified against the record's checksum while
copying (its change-manager copy read when the file is gone), once per URI and checksum, and each
function resource into ``DIR/data/<sha256 of its URI>/<name>`` (Hive records no checksum for them),
and names the copies (``file://`` URIs) in the records, so the dump loads with ``--source-prefix
file://DIR/data`` and nothing of the source. Runbook: docs/dr.md, "A dump".
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from confluent_kafka.serialization import MessageField, SerializationContext

from streamer import checksums
from streamer.archive.archiver import append, to_archived
from streamer.archive.manifest import ArchiveError, Manifest
from streamer.archive.ocf import ArchivedRecord
from streamer.archive.store import ArchiveStore
from streamer.errors import StreamerError
from streamer.events.codec import EventSerializer
from streamer.events.model import (
    BootstrapObjectPayload,
    CreateFunctionPayload,
    Event,
    EventType,
    FileRef,
    ProgressPayload,
    Source,
)
from streamer.hive.notification import DEFAULT_CATALOG
from streamer.kafka.naming import topic_or_default
from streamer.kafka.record_size import DEFAULT_MAX_RECORD_BYTES
from streamer.source import options
from streamer.source.bootstrap_commands import source_flags
from streamer.source.options import SourceOptions, env

if TYPE_CHECKING:
    from streamer.source.bootstrap import SourceCatalog
    from streamer.source.enrich import EnrichSettings
    from streamer.source.gaps import ContiguousReader
    from streamer.source.policy import PolicySet
    from streamer.source.prepare import Prepared, Preparer
    from streamer.source.reader import NotificationReader

Rewrite = Callable[[Event], Event]


def dump_records(
    bootstrap: Sequence[Event], events: Iterable[Prepared] = (), *, source_id: str, topic: str, policy: str,
    head: int = 0, rewrite: Rewrite | None = None, clock: Callable[[], float] = time.time,
) -> Iterator[ArchivedRecord]:
    """The archive records of a bootstrap (marker last) and the prepared events after it: offsets
    0..n-1, chained from no predecessor, then PROGRESS at the last event id passed (the bootstrap's
    when there is none) and the source's ``head``. ``events`` are the agent's ``Prepared`` records,
    chained by its ``Preparer`` from the bootstrap's id; ``rewrite`` (``--with-data``) changes an
    event before it is encoded. Pure but for ``rewrite``; lazy, so a long range is never held whole."""
    if not bootstrap or bootstrap[-1].event_type is not EventType.BOOTSTRAP_END:
        raise ValueError("a bootstrap ends with its BOOTSTRAP_END marker")
    return _records(bootstrap, events, source_id=source_id, topic=topic, policy=policy, head=head,
                    rewrite=rewrite, clock=clock)


def _records(
    bootstrap: Sequence[Event], events: Iterable[Prepared], *, source_id: str, topic: str, policy: str,
    head: int, rewrite: Rewrite | None, clock: Callable[[], float],
) -> Iterator[ArchivedRecord]:
    serializer = EventSerializer()
    ctx = SerializationContext(topic, MessageField.VALUE)
    offset = 0
    prev: int | None = None
    for record in bootstrap:
        chained = dataclasses.replace(rewrite(record) if rewrite else record, prev_event_id=prev)
        key = record.db.encode() if record.db else None
        yield to_archived(offset, chained, serializer(chained, ctx), key, chained.ts_ms)
        offset += 1
        prev = record.event_id
    last = bootstrap[-1].event_id
    for item in events:
        last = item.event_id
        if item.value is None:
            continue  # passed over (policy, another catalog, no database): progress moves past it
        event = item.event
        if event is None:
            raise ValueError(f"event {item.event_id}: a prepared record without its event")
        if event.prev_event_id != prev:
            raise ValueError(f"event {item.event_id} names {event.prev_event_id} before it; the dump's last "
                             f"record is event {prev}")
        value = item.value
        if rewrite is not None:
            event = rewrite(event)
            value = serializer(event, ctx)
        yield to_archived(offset, event, value, item.key, event.ts_ms)
        offset += 1
        prev = item.event_id
    progress = Event(Source(source_id, last, int(clock())), EventType.PROGRESS,
                     ProgressPayload(last, max(head, last), policy), ts_ms=int(clock() * 1000),
                     prev_event_id=prev)
    yield to_archived(offset, progress, serializer(progress, ctx), None, progress.ts_ms)


def log_events(
    preparer: Preparer, rows: ContiguousReader, *, after: int, until: int, source_id: str, policy: PolicySet,
    catalog: str = DEFAULT_CATALOG, batch_size: int = 500, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    clock: Callable[[], float] = time.time,
) -> Iterator[Prepared]:
    """The log's events ``after < id <= until`` as the agent prepares them for its topic after event
    ``after`` (decoded, enriched, filtered by ``policy``, chained, encoded), batch by batch; one that
    cannot be decoded or is larger than ``max_record_bytes`` stops the dump at it, as it stops the
    agent (the events before it are yielded first)."""
    from streamer.source.prepare import cut_at_oversized

    last = prev = after
    while last < until:
        batch = rows.read_after(last, min(batch_size, until - last))
        if not batch:
            raise StreamerError(f"the notification log holds no event after {last}; the dump reads to "
                                f"{until}")
        prepared, failure = preparer.prepare(batch, source_id=source_id, catalog=catalog, policy=policy,
                                             prev=prev, now_ms=int(clock() * 1000))
        prepared, oversized = cut_at_oversized(prepared, max_record_bytes)
        yield from prepared
        if oversized or failure:
            raise oversized or failure  # type: ignore[misc]
        last = batch[-1].event_id
        prev = next((p.event_id for p in reversed(prepared) if p.value is not None), prev)


DATA_DIR = "data"


def data_copy_path(uri: str, checksum: str) -> str:
    """Where ``--with-data`` keeps the file ``uri`` with ``checksum``, relative to the dump:
    ``data/<sha256 of uri and checksum>/<name>`` (a file rewritten in place gets one copy per content)."""
    digest = hashlib.sha256(f"{uri}\0{checksum}".encode()).hexdigest()
    return f"{DATA_DIR}/{digest}/{posixpath.basename(uri.rstrip('/'))}"


def resource_copy_path(uri: str) -> str:
    """Where ``--with-data`` keeps the function resource ``uri``: ``data/<sha256 of uri>/<name>``."""
    digest = hashlib.sha256(uri.encode()).hexdigest()
    return f"{DATA_DIR}/{digest}/{posixpath.basename(uri.rstrip('/'))}"


class DataCopier:
    """``--with-data``: each data file an event names copied into ``dump_dir``/data once, verified, and
    each function resource once."""

    def __init__(self, dump_dir: Path) -> None:
        self.dump_dir = dump_dir
        self.copied: dict[tuple[str, str], str] = {}  # (uri, checksum) -> the copy's file:// URI
        self.bytes = 0

    def __call__(self, event: Event) -> Event:
        """``event`` naming the copies of its files (``file://`` URIs, no ``cm_uri``), each copied and
        verified against its checksum while it is copied (its change-manager copy read when the file
        is gone), and of its function's resources. A file without a checksum, unreadable, or whose
        bytes do not match, or a resource that is gone, is an error naming the event and the file."""
        from streamer.source.enrich import map_refs

        event = map_refs(event, lambda ref: self._copy(event, ref))
        payload = event.payload
        if not isinstance(payload, CreateFunctionPayload | BootstrapObjectPayload):
            return event
        fn = payload.function
        if fn is None or not fn.resource_uris:
            return event
        uris = [dataclasses.replace(r, uri=self._copy_resource(event, r.uri)) for r in fn.resource_uris]
        changed: CreateFunctionPayload | BootstrapObjectPayload = dataclasses.replace(
            payload, function=dataclasses.replace(fn, resource_uris=uris))
        return dataclasses.replace(event, payload=changed)

    def _copy_resource(self, event: Event, uri: str) -> str:
        """A function resource (JAR, FILE, ARCHIVE) copied to ``data/<sha256 of its URI>/<name>`` as it
        is read: Hive records no checksum for them, so there is none to verify against."""
        from streamer.filesystems import url_to_fs

        done = self.copied.get((uri, ""))
        if done is not None:
            return done
        target = self.dump_dir / resource_copy_path(uri)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.part")
        fs, path = url_to_fs(uri)
        try:
            with fs.open(path, "rb") as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                    self.bytes += len(chunk)
        except FileNotFoundError as exc:
            tmp.unlink(missing_ok=True)
            obj = ".".join(n for n in (event.db, event.table) if n)
            raise StreamerError(f"event {event.event_id} ({event.event_type.value} {obj}): function resource "
                                f"{uri} is not found on the source; nothing copied") from exc
        tmp.replace(target)
        copy = target.resolve().as_uri()
        self.copied[(uri, "")] = copy
        return copy

    def _copy(self, event: Event, ref: FileRef) -> FileRef:
        from streamer.filesystems import url_to_fs

        obj = ".".join(n for n in (event.db, event.table) if n)
        what = f"event {event.event_id} ({event.event_type.value} {obj}): file {ref.uri}"
        if not ref.checksum or not ref.checksum_algorithm:
            raise StreamerError(f"{what} has no checksum: --with-data copies only verified files "
                                "(give the source's --checksum-algorithm)")
        done = self.copied.get((ref.uri, ref.checksum))
        if done is not None:
            return dataclasses.replace(ref, uri=done, cm_uri=None)
        target = self.dump_dir / data_copy_path(ref.uri, ref.checksum)
        target.parent.mkdir(parents=True, exist_ok=True)
        hasher = checksums.new(ref.checksum_algorithm, ref.checksum)
        tmp = target.with_name(f".{target.name}.part")
        size = 0
        for url in (ref.uri, ref.cm_uri):
            if url is None:
                raise StreamerError(f"{what}: not found on the source (and no change-manager copy)")
            fs, path = url_to_fs(url)
            try:
                with fs.open(path, "rb") as src, open(tmp, "wb") as dst:
                    while chunk := src.read(1 << 20):
                        hasher.update(chunk)
                        dst.write(chunk)
                        size += len(chunk)
                break
            except FileNotFoundError:
                hasher = checksums.new(ref.checksum_algorithm, ref.checksum)
                size = 0
                continue
        if hasher.hexdigest() != ref.checksum:
            tmp.unlink(missing_ok=True)
            raise StreamerError(f"{what}: its bytes have checksum {hasher.hexdigest()}, the record says "
                                f"{ref.checksum}; it changed since the dump read it; nothing copied")
        tmp.replace(target)
        self.bytes += size
        uri = target.resolve().as_uri()
        self.copied[(ref.uri, ref.checksum)] = uri
        return dataclasses.replace(ref, uri=uri, cm_uri=None)


def copy_data(events: Sequence[Event], dump_dir: Path) -> list[Event]:
    """``events`` naming verified copies of their files in ``dump_dir``/data (``DataCopier``)."""
    copier = DataCopier(dump_dir)
    return [copier(e) for e in events]


def write_dump(url: str, records: Iterable[ArchivedRecord], *, topic: str, source_id: str,
               per_file: int = 10_000) -> Manifest:
    """Write ``records`` into the empty directory ``url`` as archive files of ``per_file`` records."""
    store = ArchiveStore(url)
    store.ensure()
    if store.read_manifest() is not None:
        raise ArchiveError(f"{url} holds an archive already; dump into an empty directory")
    manifest = Manifest(topic, source_id, 0)
    it = iter(records)
    while chunk := list(itertools.islice(it, per_file)):
        manifest = append(store, manifest, chunk)
    return manifest


@dataclass(frozen=True)
class DumpSettings:
    """What ``streamer dump`` dumps and how; see its ``--help`` for each."""

    source_id: str
    to: str
    policy: PolicySet
    enrich: EnrichSettings
    topic: str | None = None
    catalog: str = DEFAULT_CATALOG
    with_data: bool = False
    until_event: int | None = None
    records_per_file: int = 10_000
    partitions_per_record: int = 200
    batch_size: int = 500
    gap_settle_seconds: float = 5.0
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES

    @property
    def topic_name(self) -> str:
        return topic_or_default(self.topic, self.source_id)


@dataclass(frozen=True)
class DumpSummary:
    bootstrap_id: int
    last_event_id: int  # what the PROGRESS record claims
    records: int
    files: int
    data_bytes: int = 0


def run_dump(
    settings: DumpSettings, reader: NotificationReader, catalog: SourceCatalog, *, locator: Any = None,
    after_bootstrap: Callable[[int], None] | None = None,
) -> DumpSummary:
    """Read the bootstrap, then the log from its id to the head as read then (or ``until_event``), and
    write them. ``locator``: where INSERTs without files are located (default: through the reader, as
    the agent); ``after_bootstrap`` is called with the bootstrap's id before the head is read."""
    from streamer.source.bootstrap import RecordLimits, enrich_records, records, snapshot
    from streamer.source.enrich import FROM_READER, Enricher
    from streamer.source.gaps import ContiguousReader
    from streamer.source.policy_record import policy_record
    from streamer.source.prepare import Preparer

    topic = settings.topic_name
    policy = policy_record(settings.policy)
    state = snapshot(catalog, reader, settings.policy, settings.source_id, enrich=settings.enrich, at_least=0,
                     catalog_name=settings.catalog)
    recs = records(state, settings.source_id, policy=policy, event_time=int(time.time()),
                   limits=RecordLimits(partitions=settings.partitions_per_record))
    recs = enrich_records(recs, settings.enrich)
    bootstrap_id = recs[-1].event_id
    if settings.until_event is not None and settings.until_event < bootstrap_id:
        raise StreamerError(f"--until-event {settings.until_event} is before the bootstrap's event id "
                            f"{bootstrap_id} (the source's state can only be read as it is now)")
    if after_bootstrap is not None:
        after_bootstrap(bootstrap_id)
    head = reader.head_event_id()
    until = head if settings.until_event is None else settings.until_event
    if until > head:
        raise StreamerError(f"--until-event {until} is after the notification log's head, event {head}")
    copier = None
    if settings.with_data:
        if "://" in settings.to and not settings.to.startswith("file://"):
            raise click.UsageError("--with-data needs a local --to directory")
        copier = DataCopier(Path(settings.to.removeprefix("file://")))
    enricher = Enricher(settings.enrich, reader, locator=FROM_READER if locator is None else locator)
    try:
        preparer = Preparer(enricher, EventSerializer(), topic)
        rows = ContiguousReader(reader, settings.gap_settle_seconds)
        events = log_events(preparer, rows, after=bootstrap_id, until=until, source_id=settings.source_id,
                            policy=settings.policy, catalog=settings.catalog, batch_size=settings.batch_size,
                            max_record_bytes=settings.max_record_bytes)
        archived = dump_records(recs, events, source_id=settings.source_id, topic=topic, policy=policy,
                                head=head, rewrite=copier)
        manifest = write_dump(settings.to, archived, topic=topic, source_id=settings.source_id,
                              per_file=settings.records_per_file)
    finally:
        enricher.close()
    assert manifest.last_event_id is not None  # the PROGRESS record at least
    return DumpSummary(bootstrap_id, manifest.last_event_id, manifest.records, len(manifest.files),
                       copier.bytes if copier else 0)


# --- the command ------------------------------------------------------------------------------------


@click.command("dump")
@options.source_id_option("Name of the source; names the dump's topic, as `source bootstrap` names it.")
@source_flags("; INSERTs without files are then located over --hms-uri, as the agent does")
@options.scope_options("Replication policy in Hive's syntax; repeatable. Default: every database.")
@options.kafka_options("Unused by dump (no broker is contacted); accepted so the source's flags carry over.",
                       servers_required=False)
@options.file_options("The source's change-manager root.")
@click.option("--to", "to_dir", required=True,
              help="The empty directory (or hdfs://, s3a:// URL) to dump into.")
@click.option("--until-event", type=click.IntRange(0), default=None, **env("UNTIL_EVENT"),
              help="Dump the log's events up to this id (default: up to the log's head as read once the "
                   "bootstrap is read); before the bootstrap's id or after the head is an error.")
@click.option("--partitions-per-record", default=200, show_default=True, type=click.IntRange(1),
              help="Partitions of one table carried by one record.")
@click.option("--with-data", is_flag=True,
              help="Copy every data file the records name into DIR/data/<sha256 of its URI and checksum>/"
                   "<name>, verified against the record's checksum, and name the copies in the records: a "
                   "self-contained dump, loaded with --source-prefix file://DIR/data (a local DIR only).")
@click.option("--records-per-file", default=10_000, show_default=True, type=click.IntRange(1),
              help="Records per archive file.")
@click.option("--batch-size", default=500, show_default=True, type=click.IntRange(1), **env("BATCH_SIZE"),
              help="Log events read and prepared at a time, as the agent's --batch-size.")
@click.option("--gap-settle-seconds", default=5.0, show_default=True, type=click.FloatRange(0),
              **env("GAP_SETTLE_SECONDS"),
              help="How long a missing event id may take to commit before the dump stops on the gap.")
@options.with_source_options
def dump_cmd(opts: SourceOptions, warehouse_url: str | None, hms_uri: str | None, notification_db: str | None,
             to_dir: str, until_event: int | None, partitions_per_record: int, with_data: bool,
             records_per_file: int, batch_size: int, gap_settle_seconds: float) -> None:
    """Dump a consistent bootstrap of the policy and the log's events after it into an archive
    directory (Hive's REPL DUMP), for `streamer load --from DIR` with no broker. No Kafka is used."""
    import contextlib

    from streamer.kafka.record_size import check_limit
    from streamer.source.bootstrap_commands import check_source_flags, open_source
    from streamer.source.enrich import EnrichSettings

    check_source_flags(warehouse_url, hms_uri, notification_db)
    if with_data and "://" in to_dir and not to_dir.startswith("file://"):
        raise click.UsageError("--with-data needs a local --to directory")
    settings = DumpSettings(
        opts.source_id, to_dir, opts.policy(),
        EnrichSettings(checksum_algorithm=opts.checksum_algorithm, cmroot=opts.cmroot), topic=opts.topic,
        catalog=opts.catalog, with_data=with_data, until_event=until_event, records_per_file=records_per_file,
        partitions_per_record=partitions_per_record, batch_size=batch_size,
        gap_settle_seconds=gap_settle_seconds, max_record_bytes=check_limit(opts.max_record_bytes),
    )
    with contextlib.ExitStack() as resources:
        reader, catalog = open_source(resources, opts, warehouse_url=warehouse_url, hms_uri=hms_uri,
                                      notification_db=notification_db)
        locator = None
        if hms_uri and notification_db:  # the agent's rule: the log from the database, INSERTs over Thrift
            from streamer.source.insert_files import HmsLocator

            locator = HmsLocator(str(hms_uri), auth=opts.auth())
        summary = run_dump(settings, reader, catalog, locator=locator)
    data = f", {summary.data_bytes} bytes of data copied" if with_data else ""
    click.echo(f"dumped {opts.source_id}: a bootstrap as of event {summary.bootstrap_id} and the events "
               f"after it through event {summary.last_event_id}: {summary.records} records in "
               f"{summary.files} files to {to_dir} (topic {settings.topic_name}){data}")
