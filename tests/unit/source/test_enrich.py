import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import DecodeError
from streamer.events.model import (
    AddPartitionPayload,
    CommitTxnPayload,
    CreateTablePayload,
    Event,
    EventType,
    FileRef,
    InsertPayload,
    Source,
    TableSnapshot,
)
from streamer.source.enrich import (
    MAX_COMPONENT_LENGTH,
    Enricher,
    EnrichSettings,
    FsspecInspector,
    enrich_ref,
    hive2_cm_path,
    map_refs,
)
from streamer.source.reader import SqlNotificationReader
from tests.unit.source.logdb import sqlite_logdb

# what HDFS records for a file of one block (bytesPerCRC 512, crcPerBlock 0, the MD5)
HDFS_VALUE = "00000200" + "0000000000000000" + "21c8590a52605e01296312f9dccf3904"


def _file(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return "file:" + str(path)  # Hadoop's file:/path form


def test_missing_checksum_is_computed_with_size_and_cm_uri(tmp_path: Path) -> None:
    uri = _file(tmp_path, "part-0", b"hello")
    ref = enrich_ref(FileRef(uri), EnrichSettings(cmroot="file:/cm"), FsspecInspector())
    digest = hashlib.sha256(b"hello").hexdigest()
    assert (ref.checksum, ref.checksum_algorithm, ref.size) == (digest, "sha256", 5)
    assert ref.cm_uri == f"file:/cm/part-0_{digest}"


def test_recorded_checksum_is_kept_and_labelled_with_the_source_algorithm(tmp_path: Path) -> None:
    uri = _file(tmp_path, "f", b"abc")
    settings = EnrichSettings(checksum_algorithm="hdfs-md5-of-md5-of-crc32c", cmroot="hdfs://nn/cm")
    recorded = HDFS_VALUE
    ref = enrich_ref(FileRef(uri, checksum=recorded), settings, FsspecInspector())
    # the size of the file as it is now may not be the size of the file the checksum describes
    assert (ref.checksum, ref.checksum_algorithm, ref.size) == (recorded, "hdfs-md5-of-md5-of-crc32c", None)
    # Hive 2.3's `uri#checksum`: its change manager names the copy by the checksum alone
    assert ref.cm_uri == f"hdfs://nn/cm/{recorded}"
    # a computed sha256 never names a cm copy of a source whose checksums are something else
    computed = enrich_ref(FileRef(uri), settings, FsspecInspector())
    assert computed.checksum_algorithm == "sha256" and computed.cm_uri is None


def test_a_recorded_checksum_names_hive_2_3s_cm_copy_and_a_named_cmroot_wins(tmp_path: Path) -> None:
    uri = _file(tmp_path, "part-00000", b"abc")
    md5 = hashlib.md5(b"abc").hexdigest()
    settings, files = EnrichSettings("md5", cmroot="file:///cm/"), FsspecInspector()
    assert enrich_ref(FileRef(uri, checksum=md5), settings, files).cm_uri == f"file:///cm/{md5}"
    named = FileRef(uri, checksum=md5, cm_uri=f"hdfs://nn/cmroot/part-00000_{md5}")  # Hive 3's encoding
    assert enrich_ref(named, settings, files).cm_uri == named.cm_uri
    assert enrich_ref(FileRef(uri, checksum=md5), EnrichSettings("md5"), files).cm_uri is None


@given(st.text(alphabet="0123456789abcdef", min_size=1, max_size=600))
def test_hive2_cm_names_fit_one_path_component(checksum: str) -> None:
    name = hive2_cm_path("hdfs://nn/cm", checksum).removeprefix("hdfs://nn/cm/")
    assert len(name) <= MAX_COMPONENT_LENGTH and checksum.startswith(name) and "/" not in name
    assert (name == checksum) == (len(checksum) <= MAX_COMPONENT_LENGTH)


def test_a_checksum_the_algorithm_cannot_produce_stops_the_agent_at_its_event(tmp_path: Path) -> None:
    uri = _file(tmp_path, "f", b"abc")
    sha = hashlib.sha256(b"abc").hexdigest()
    settings = EnrichSettings(checksum_algorithm="hdfs-md5-of-md5-of-crc32c")
    payload = InsertPayload(None, None, [], False, [FileRef(uri, checksum=sha)])
    event = Event(Source("s", 17, 0), EventType.INSERT, payload, db="sales", table="orders")
    with pytest.raises(DecodeError) as info:
        Enricher(settings, reader=None, files=FsspecInspector())(event)  # type: ignore[arg-type]
    error = info.value
    assert (error.event_id, error.obj) == (17, "sales.orders")
    assert uri in error.cause and "has 32 bytes" in error.cause and "--checksum-algorithm" in error.cause


def test_vanished_file_stays_unverified(tmp_path: Path) -> None:
    ref = enrich_ref(FileRef("file:" + str(tmp_path / "gone")), EnrichSettings(), FsspecInspector())
    assert (ref.checksum, ref.checksum_algorithm, ref.size, ref.cm_uri) == (None, None, None, None)


def test_map_refs_reaches_nested_lists() -> None:
    payload = AddPartitionPayload(None, [], [FileRef("a"), FileRef("b")])
    out = map_refs(payload, lambda r: FileRef(r.uri.upper()))
    assert [f.uri for f in out.files] == ["A", "B"]
    untouched = CreateTablePayload(TableSnapshot("t", "d"))
    assert map_refs(untouched, lambda r: r) == untouched


def test_commit_txn_gets_its_writes(tmp_path: Path) -> None:
    uri = _file(tmp_path, "bucket_00000", b"x")
    chk = hashlib.sha256(b"x").hexdigest()
    with sqlite_logdb(str(tmp_path / "ms.db")) as db:
        db.add_write(5, 1, "sales", "t", f"{uri}#{chk}##delta_1_1")
        reader = SqlNotificationReader(db.url)
        event = Event(Source("s", 9, 0), EventType.COMMIT_TXN, CommitTxnPayload(5))
        enriched = Enricher(EnrichSettings(cmroot="/cm"), reader)(event)
        reader.close()
    assert isinstance(enriched.payload, CommitTxnPayload)
    (write,) = enriched.payload.writes
    (ref,) = write.files
    assert (write.db, write.table, write.write_id) == ("sales", "t", 1)
    expected = (chk, None, "delta_1_1", f"/cm/bucket_00000_{chk}")
    assert (ref.checksum, ref.size, ref.subdir, ref.cm_uri) == expected


def test_size_is_taken_only_with_a_checksum_read_at_the_same_time(tmp_path: Path) -> None:
    """A file rewritten after its event must not lend its new size to the old checksum."""
    uri = _file(tmp_path, "f", b"old")
    settings = EnrichSettings(cmroot=str(tmp_path / "cm"))
    recorded = FileRef(uri, checksum=hashlib.sha256(b"old").hexdigest())
    (tmp_path / "f").write_bytes(b"rewritten, longer")
    assert enrich_ref(recorded, settings, FsspecInspector()).size is None
    computed = enrich_ref(FileRef(uri), settings, FsspecInspector())
    assert computed.size == len(b"rewritten, longer")
    assert computed.checksum == hashlib.sha256(b"rewritten, longer").hexdigest()
