"""``streamer dump --policy ... --to DIR`` (Hive's REPL DUMP): a consistent bootstrap of a source,
written as an event archive that ``streamer load --from DIR`` applies with no broker.

The records are the ones ``streamer bootstrap`` would publish (the objects of the policy as of one
event id E, then the BOOTSTRAP_END marker, then a PROGRESS record at E), encoded as the source
encodes them, chained (each record's ``prev_event_id`` is the one before it, the first names none)
and written with the archive's writer (``streamer.archive.archiver.append``). There is no Kafka: the
dump numbers its records 0..n-1 and these are the "offsets" of its manifest.

``--with-data`` (``copy_data``) copies each data file the records name into
``DIR/data/<sha256 of its URI>/<name>``, verified against the record's checksum while copying, and
names the copies (``file://`` URIs) in the records, so the dump loads with
``--source-prefix file://DIR/data`` and nothing of the source. Not yet: the events after E up to the
log's head; the PROGRESS record therefore claims E only, never more than the dump holds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import click
from confluent_kafka.serialization import MessageField, SerializationContext

from streamer import checksums
from streamer.archive.archiver import append, to_archived
from streamer.archive.manifest import ArchiveError, Manifest
from streamer.archive.ocf import ArchivedRecord
from streamer.archive.store import ArchiveStore
from streamer.errors import StreamerError
from streamer.events.codec import EventSerializer
from streamer.events.model import BootstrapObjectPayload, Event, EventType, FileRef, ProgressPayload, Source
from streamer.kafka.naming import topic_or_default
from streamer.source import options
from streamer.source.options import SourceOptions, env


def dump_records(
    bootstrap: Sequence[Event], *, source_id: str, topic: str, policy: str,
    clock: Callable[[], float] = time.time,
) -> list[ArchivedRecord]:
    """The archive records of a bootstrap (marker last): offsets 0..n-1, the chain from no predecessor,
    then PROGRESS at the bootstrap's id. Pure."""
    if not bootstrap or bootstrap[-1].event_type is not EventType.BOOTSTRAP_END:
        raise ValueError("a bootstrap ends with its BOOTSTRAP_END marker")
    serializer = EventSerializer()
    ctx = SerializationContext(topic, MessageField.VALUE)
    bootstrap_id = bootstrap[-1].event_id
    progress = Event(Source(source_id, bootstrap_id, int(clock())), EventType.PROGRESS,
                     ProgressPayload(bootstrap_id, bootstrap_id, policy), ts_ms=int(clock() * 1000))
    out: list[ArchivedRecord] = []
    prev: int | None = None
    for offset, event in enumerate([*bootstrap, progress]):
        chained = dataclasses.replace(event, prev_event_id=prev)
        value = serializer(chained, ctx)
        key = event.db.encode() if event.db else None
        out.append(to_archived(offset, chained, value, key, chained.ts_ms))
        prev = event.event_id
    return out


DATA_DIR = "data"


def data_copy_path(uri: str) -> str:
    """Where ``--with-data`` keeps the file ``uri``, relative to the dump: ``data/<sha256 of uri>/<name>``."""
    digest = hashlib.sha256(uri.encode()).hexdigest()
    return f"{DATA_DIR}/{digest}/{posixpath.basename(uri.rstrip('/'))}"


def copy_data(bootstrap: Sequence[Event], dump_dir: Path) -> list[Event]:
    """Copy every data file the records name into ``dump_dir``/data, each verified against its
    record's checksum while it is copied (its change-manager copy read when the file is gone), and
    return the records naming the copies (``file://`` URIs, no ``cm_uri``). A file without a
    checksum, unreadable, or whose bytes do not match is an error naming the event and the file."""
    from streamer.filesystems import url_to_fs

    out: list[Event] = []
    for event in bootstrap:
        payload = event.payload
        if not isinstance(payload, BootstrapObjectPayload) or not payload.files:
            out.append(event)
            continue
        refs: list[FileRef] = []
        for ref in payload.files:
            obj = ".".join(n for n in (event.db, event.table) if n)
            what = f"event {event.event_id} ({event.event_type.value} {obj}): file {ref.uri}"
            if not ref.checksum or not ref.checksum_algorithm:
                raise StreamerError(f"{what} has no checksum: --with-data copies only verified files "
                                    "(give the source's --checksum-algorithm)")
            target = dump_dir / data_copy_path(ref.uri)
            target.parent.mkdir(parents=True, exist_ok=True)
            hasher = checksums.new(ref.checksum_algorithm, ref.checksum)
            tmp = target.with_name(f".{target.name}.part")
            for url in (ref.uri, ref.cm_uri):
                if url is None:
                    raise StreamerError(f"{what}: not found on the source (and no change-manager copy)")
                fs, path = url_to_fs(url)
                try:
                    with fs.open(path, "rb") as src, open(tmp, "wb") as dst:
                        while chunk := src.read(1 << 20):
                            hasher.update(chunk)
                            dst.write(chunk)
                    break
                except FileNotFoundError:
                    hasher = checksums.new(ref.checksum_algorithm, ref.checksum)
                    continue
            if hasher.hexdigest() != ref.checksum:
                tmp.unlink(missing_ok=True)
                raise StreamerError(f"{what}: its bytes have checksum {hasher.hexdigest()}, the record says "
                                    f"{ref.checksum}; it changed since the dump read it; nothing copied")
            tmp.replace(target)
            refs.append(dataclasses.replace(ref, uri=target.resolve().as_uri(), cm_uri=None))
        out.append(dataclasses.replace(event, payload=dataclasses.replace(payload, files=refs)))
    return out


def write_dump(url: str, records: list[ArchivedRecord], *, topic: str, source_id: str,
               per_file: int = 10_000) -> Manifest:
    """Write ``records`` into the empty directory ``url`` as archive files of ``per_file`` records."""
    store = ArchiveStore(url)
    store.ensure()
    if store.read_manifest() is not None:
        raise ArchiveError(f"{url} holds an archive already; dump into an empty directory")
    manifest = Manifest(topic, source_id, 0)
    for start in range(0, len(records), per_file):
        manifest = append(store, manifest, records[start : start + per_file])
    return manifest


# --- the command ------------------------------------------------------------------------------------


@click.command("dump")
@options.source_id_option("Name of the source; names the dump's topic, as `source bootstrap` names it.")
@click.option("--warehouse", "warehouse_url", required=True, **env("WAREHOUSE"),
              help="The bundled source warehouse's metastore URL (sqlite path or postgresql://...); its "
                   "notification log is read too.")
@options.scope_options("Replication policy in Hive's syntax; repeatable. Default: every database.")
@options.kafka_options("Unused by dump (no broker is contacted); accepted so the source's flags carry over.",
                       servers_required=False)
@options.file_options("The source's change-manager root.")
@click.option("--to", "to_dir", required=True,
              help="The empty directory (or hdfs://, s3a:// URL) to dump into.")
@click.option("--partitions-per-record", default=200, show_default=True, type=click.IntRange(1),
              help="Partitions of one table carried by one record.")
@click.option("--with-data", is_flag=True,
              help="Copy every data file the records name into DIR/data/<sha256 of its URI>/<name>, verified "
                   "against the record's checksum, and name the copies in the records: a self-contained "
                   "dump, loaded with --source-prefix file://DIR/data (a local DIR only).")
@click.option("--records-per-file", default=10_000, show_default=True, type=click.IntRange(1),
              help="Records per archive file.")
@options.with_source_options
def dump_cmd(opts: SourceOptions, warehouse_url: str, to_dir: str, partitions_per_record: int,
             with_data: bool, records_per_file: int) -> None:
    """Dump a consistent bootstrap of the policy into an archive directory (Hive's REPL DUMP), for
    `streamer load --from DIR` with no broker. No Kafka is used."""
    from streamer.source.bootstrap import RecordLimits, enrich_records, records, snapshot
    from streamer.source.enrich import EnrichSettings
    from streamer.source.policy_record import policy_record
    from streamer.source.reader import SqlNotificationReader
    from streamer.source.warehouse_catalog import WarehouseCatalog
    from streamer.warehouse import Warehouse

    scope = opts.policy()
    enrich = EnrichSettings(checksum_algorithm=opts.checksum_algorithm, cmroot=opts.cmroot)
    topic = topic_or_default(opts.topic, opts.source_id)
    policy = policy_record(scope)
    reader = SqlNotificationReader(warehouse_url)
    try:
        reader.check()
        wh = Warehouse.open(warehouse_url, source_id=opts.source_id)
        try:
            state = snapshot(WarehouseCatalog(wh), reader, scope, opts.source_id, enrich=enrich,
                             at_least=0, catalog_name=opts.catalog)
            recs = records(state, opts.source_id, policy=policy, event_time=int(time.time()),
                           limits=RecordLimits(partitions=partitions_per_record))
            recs = enrich_records(recs, enrich)
        finally:
            wh.close()
    finally:
        reader.close()
    if with_data:
        if "://" in to_dir and not to_dir.startswith("file://"):
            raise click.UsageError("--with-data needs a local --to directory")
        recs = copy_data(recs, Path(to_dir.removeprefix("file://")))
    archived = dump_records(recs, source_id=opts.source_id, topic=topic, policy=policy)
    manifest = write_dump(to_dir, archived, topic=topic, source_id=opts.source_id,
                          per_file=records_per_file)
    click.echo(f"dumped {opts.source_id} as of event {recs[-1].event_id}: {len(archived)} records in "
               f"{len(manifest.files)} files to {to_dir} (topic {topic})")
