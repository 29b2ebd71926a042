"""The archive on an object store: files and manifest through s3a:// (s3fs) against a real S3 API
server (moto's, in server mode), the crash rules included, and read back by the load's reader."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from streamer.archive.archiver import append, to_archived
from streamer.archive.manifest import ArchiveError, Manifest, file_name
from streamer.archive.ocf import ArchivedRecord, FileHeader, encode
from streamer.archive.reading import pending, read_archive, verified_records
from streamer.archive.store import ArchiveStore
from streamer.events.codec import EventDeserializer, EventSerializer
from tests.fixtures.s3 import S3Server
from tests.unit.target import builders as b

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOPIC, SOURCE = "streamer.src1.events", "src1"


def _records(first_id: int, n: int, first_offset: int, prev: int | None) -> list[ArchivedRecord]:
    out, serialize = [], EventSerializer()
    for i in range(n):
        event = dataclasses.replace(b.create_db(first_id + i, f"db{first_id + i}"), prev_event_id=prev)
        out.append(to_archived(first_offset + i, event, serialize(event), None, None))
        prev = event.event_id
    return out


def test_an_archive_on_s3a_is_written_exactly_once_and_verified_on_read(s3_env: S3Server) -> None:
    bucket = f"arch-{uuid.uuid4().hex[:8]}"
    fs = s3_env.filesystem()
    fs.mkdir(bucket)  # type: ignore[attr-defined]
    url = f"s3a://{bucket}/prod"
    store = ArchiveStore(url)
    store.ensure()
    manifest = append(store, Manifest(TOPIC, SOURCE), _records(1, 4, 0, None))
    manifest = append(store, manifest, _records(5, 3, 4, 4))
    # a crash between a file and its manifest: the file is an orphan, removed by the next start
    orphan = _records(8, 2, 7, 7)
    store.write_file(file_name(7, 8), encode(orphan, FileHeader(TOPIC, 0, SOURCE)))
    assert store.remove_orphans(ArchiveStore(url).read_manifest()) == [file_name(7, 8)]
    manifest = append(store, manifest, orphan)

    store, read = read_archive(url)
    assert read == manifest and read.records == 9
    decode = EventDeserializer(check_envelope=False)
    ids = [r.event_id for before, entry, _ in pending(read, None)
           for r in verified_records(store, read, before, entry, decode)]
    assert ids == list(range(1, 10))
    # an object replaced on the store is refused by its sha256
    victim = read.files[1]
    fs.pipe_file(f"{bucket}/prod/{victim.file}",  # type: ignore[attr-defined]
                 encode(_records(5, 3, 4, 4)[::-1], FileHeader(TOPIC, 0, SOURCE)))
    with pytest.raises(ArchiveError, match=rf"{victim.file} \(events 5\.\.7, offsets 4\.\.6\)"):
        verified_records(store, read, read.files[0], victim, decode)
