"""The archive's manifest, its Avro files and the checks that refuse a truncated, reordered, altered
or unchained file before anything of it is applied; the store's crash rules on a real directory."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.archive.archiver import append, make_entry, to_archived
from streamer.archive.manifest import (
    ArchiveError,
    Entry,
    Manifest,
    file_name,
    from_json,
    to_json,
)
from streamer.archive.ocf import ArchivedRecord, FileHeader, decode, encode
from streamer.archive.store import PENDING_MANIFEST, ArchiveStore
from streamer.archive.verify import check_record, verify_file
from streamer.events.codec import EventDeserializer, EventSerializer
from tests.unit.target import builders as b

TOPIC, SOURCE = "streamer.src1.events", "src1"
HEADER = FileHeader(TOPIC, 0, SOURCE)
SERIALIZE = EventSerializer()
DECODE = EventDeserializer(check_envelope=False)


def _records(first_id: int, n: int, first_offset: int = 0, prev: int | None = None,
             gap: int = 1) -> list[ArchivedRecord]:
    """``n`` chained CREATE_DATABASE records, encoded as the agent publishes them."""
    out = []
    for i in range(n):
        event = dataclasses.replace(b.create_db(first_id + i, f"db{first_id + i}"), prev_event_id=prev)
        out.append(to_archived(first_offset + i * gap, event, SERIALIZE(event), None, 1_700_000_000_000 + i))
        prev = event.event_id
    return out


def _file(records: list[ArchivedRecord]) -> tuple[Entry, bytes]:
    data = encode(records, HEADER)
    return make_entry(records, data, 0), data


def _manifest(*entries: Entry) -> Manifest:
    manifest = Manifest(TOPIC, SOURCE)
    for entry in entries:
        manifest = manifest.with_entry(entry)
    return manifest


# --- the manifest ---------------------------------------------------------------------------------

_entries = st.lists(st.tuples(st.integers(1, 50), st.integers(1, 3), st.integers(0, 5)), max_size=8)


@settings(max_examples=60)
@given(_entries)
def test_a_manifest_reads_back_as_written(shape: list[tuple[int, int, int]]) -> None:
    manifest, offset, event_id, prev = Manifest(TOPIC, SOURCE), 0, 1, None
    for count, gap, hole in shape:
        first = offset + hole
        last = first + (count - 1) * gap
        entry = Entry(file_name(first, last), first, last, event_id, event_id + count - 1, prev,
                      event_id + count - 2 if count > 1 else prev, count, 100 + count, "a" * 64, 5)
        manifest = manifest.with_entry(entry)
        offset, prev, event_id = last + 1, event_id + count - 1, event_id + count
    assert from_json(to_json(manifest)) == manifest
    assert json.loads(to_json(manifest))["format"] == "streamer-archive"
    assert manifest.next_offset == (offset if shape else None)


def test_the_manifest_refuses_entries_out_of_order_or_unchained() -> None:
    e1, _ = _file(_records(1, 3))
    e2, _ = _file(_records(4, 2, first_offset=3, prev=3))
    assert _manifest(e1, e2).records == 5
    with pytest.raises(ArchiveError, match="out of order"):
        _manifest(e2, e1)
    gap, _ = _file(_records(6, 2, first_offset=5, prev=5))  # event 4..5 are in e2, but e2 is left out
    with pytest.raises(ArchiveError, match=r"events 6\.\.7.*follows event 5, but the file before it ends at "
                                           r"event 3: records between them are missing"):
        _manifest(e1, gap)


@pytest.mark.parametrize("change", [
    {"version": 2}, {"format": "other"}, {"topic": 3}, {"files": {}},
])
def test_a_malformed_manifest_is_refused(change: dict[str, object]) -> None:
    e1, _ = _file(_records(1, 2))
    body = {**json.loads(to_json(_manifest(e1))), **change}
    with pytest.raises(ArchiveError):
        from_json(json.dumps(body).encode())


def test_an_entry_with_a_wrong_field_type_is_named() -> None:
    e1, _ = _file(_records(1, 2))
    body = json.loads(to_json(_manifest(e1)))
    body["files"][0]["records"] = "2"
    with pytest.raises(ArchiveError, match=r"files\[0\]: records is '2'"):
        from_json(json.dumps(body).encode())


# --- the files --------------------------------------------------------------------------------

@settings(max_examples=25)
@given(st.integers(1, 40), st.integers(0, 1000), st.integers(1, 3))
def test_a_file_verifies_and_gives_back_its_records(n: int, first_offset: int, gap: int) -> None:
    records = _records(10, n, first_offset, prev=9, gap=gap)
    entry, data = _file(records)
    before = dataclasses.replace(entry, file=file_name(0, 0), first_offset=0, last_offset=0,
                                 first_event_id=9, last_event_id=9)
    got = verify_file(entry, data, _manifest(), before, DECODE)
    assert got == records
    assert [DECODE(r.value) for r in got] == [DECODE(SERIALIZE(DECODE(r.value))) for r in records]


def test_a_truncated_file_is_refused_naming_file_and_range() -> None:
    entry, data = _file(_records(1, 20))
    with pytest.raises(ArchiveError, match=r"events-0+-0+19\.avro \(events 1\.\.20, offsets 0\.\.19\) is "
                                           "truncated"):
        verify_file(entry, data[:-7], _manifest(), None)
    # a manifest that agrees with the truncated bytes: the file does not decode
    short = data[: len(data) // 2]
    forged = dataclasses.replace(entry, bytes=len(short), sha256=_sha(short))
    with pytest.raises(ArchiveError, match="not a readable archive file"):
        verify_file(forged, short, _manifest(), None)


@pytest.mark.parametrize("position", [0.1, 0.5, 0.95])
def test_a_changed_byte_is_refused(position: float) -> None:
    entry, data = _file(_records(1, 20))
    at = int(len(data) * position)
    altered = data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]
    with pytest.raises(ArchiveError, match=r"events 1\.\.20.*was altered: its sha256 is"):
        verify_file(entry, altered, _manifest(), None)


def test_a_reordered_file_is_refused_even_with_a_manifest_that_agrees() -> None:
    records = _records(1, 6)
    swapped = [records[0], records[2], records[1], *records[3:]]
    entry, data = _file(swapped)
    with pytest.raises(ArchiveError, match=r"offset 2 \(event 3\) follows event 2, but the record before "
                                           "it is event 1"):
        verify_file(entry, data, _manifest(), None)
    # records that name no predecessor: the offsets still must rise
    entry, data = _file([dataclasses.replace(r, prev_event_id=None) for r in swapped])
    with pytest.raises(ArchiveError, match=r"offset 1 comes after offset 2: out of order"):
        verify_file(entry, data, _manifest(), None)
    # same offsets, events swapped: the chain breaks
    moved = [dataclasses.replace(swapped[i], offset=i) for i in range(6)]
    entry, data = _file(moved)
    with pytest.raises(ArchiveError, match=r"offset 1 \(event 3\) follows event 2, but the record before "
                                           "it is event 1"):
        verify_file(entry, data, _manifest(), None)


def test_a_file_that_does_not_continue_the_one_before_is_refused() -> None:
    e1, _ = _file(_records(1, 3))
    entry, data = _file(_records(5, 3, first_offset=4, prev=4))
    with pytest.raises(ArchiveError, match="follows event 4, but the record before it is event 3"):
        verify_file(entry, data, _manifest(e1), e1)


def test_a_record_whose_columns_lie_about_its_event_is_refused() -> None:
    records = _records(1, 3)
    lying = [records[0], dataclasses.replace(records[1], value=records[2].value), records[2]]
    entry, data = _file(lying)
    with pytest.raises(ArchiveError, match=r"offset 1 says event 2 after 1 .* its encoded event is 3 after"):
        verify_file(entry, data, _manifest(), None, DECODE)
    with pytest.raises(ArchiveError, match="does not decode"):
        check_record(dataclasses.replace(records[0], value=b"\xc3\x01junk"), DECODE, "file x")


def test_a_file_of_another_topic_is_refused() -> None:
    records = _records(1, 2)
    data = encode(records, FileHeader("other", 0, SOURCE))
    entry = make_entry(records, data, 0)
    with pytest.raises(ArchiveError, match="holds topic 'other'"):
        verify_file(entry, data, _manifest(), None)


def test_the_file_metadata_names_topic_partition_and_source() -> None:
    header, records = decode(encode(_records(1, 2), HEADER), "f")
    assert header == HEADER and [r.event_id for r in records] == [1, 2]


# --- the store ---------------------------------------------------------------------------------

def test_append_writes_the_file_before_the_manifest_and_a_restart_removes_orphans(tmp_path: Path) -> None:
    store = ArchiveStore(str(tmp_path / "arch"))
    store.ensure()
    manifest = append(store, Manifest(TOPIC, SOURCE), _records(1, 3))
    assert store.read_manifest() == manifest
    # a crash after the next file but before its manifest: the file is an orphan
    orphan_records = _records(4, 2, first_offset=3, prev=3)
    orphan = file_name(3, 4)
    store.write_file(orphan, encode(orphan_records, HEADER))
    (tmp_path / "arch" / ".events-x.tmp").write_bytes(b"half")
    assert sorted(store.remove_orphans(store.read_manifest())) == [".events-x.tmp", orphan]
    assert sorted(p.name for p in (tmp_path / "arch").iterdir()) == [file_name(0, 2), "manifest.json"]
    again = append(store, manifest, orphan_records)  # archived again, whole
    assert [e.file for e in again.files] == [file_name(0, 2), orphan]
    with pytest.raises(ArchiveError, match="follows event 3, but the record before it is event 5"):
        append(store, again, _records(7, 1, first_offset=5, prev=3))
    assert store.read_manifest() == again  # the refused run wrote nothing


def test_a_pending_manifest_is_read_when_the_manifest_is_gone(tmp_path: Path) -> None:
    store = ArchiveStore(tmp_path.as_uri())  # file:// URL
    store.ensure()
    manifest = append(store, Manifest(TOPIC, SOURCE), _records(1, 2))
    (tmp_path / "manifest.json").rename(tmp_path / PENDING_MANIFEST)  # HDFS: between remove and rename
    assert store.read_manifest() == manifest


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_held_events_are_re_read_from_the_archive_or_refused_never_fewer(tmp_path: Path) -> None:
    from streamer.archive.reading import archive_replay

    store = ArchiveStore(str(tmp_path))
    manifest = append(store, Manifest(TOPIC, SOURCE), _records(1, 3, first_offset=10))
    manifest = append(store, manifest, _records(4, 3, first_offset=13, prev=3))
    replay = archive_replay(store, manifest, DECODE)
    assert [offset for offset, _ in replay(11, 15)] == [11, 12, 13, 14]
    assert [DECODE(value).event_id for _, value in replay(10, 16)] == [1, 2, 3, 4, 5, 6]
    for start, end in ((9, 12), (14, 17)):
        with pytest.raises(ArchiveError, match=rf"offsets {start}\.\.{end - 1} .* holds offsets 10\.\.15"):
            list(replay(start, end))


def test_a_store_whose_rename_does_not_replace_writes_beside_and_renames() -> None:
    """The HDFS branch (rename is atomic but does not replace), on fsspec's in-memory filesystem."""
    url = f"memory://arch-{uuid.uuid4().hex[:8]}"
    store = ArchiveStore(url)
    store.ensure()
    manifest = append(store, Manifest(TOPIC, SOURCE), _records(1, 2))
    manifest = append(store, manifest, _records(3, 2, first_offset=2, prev=2))  # replaces the manifest
    assert ArchiveStore(url).read_manifest() == manifest
    names = sorted(p.rsplit("/", 1)[-1] for p in store.fs.ls(store.root, detail=False))
    assert names == [file_name(0, 1), file_name(2, 3), "manifest.json"]  # no temporary left
    store.fs.mv(store.path("manifest.json"), store.path(PENDING_MANIFEST))  # between remove and rename
    assert ArchiveStore(url).read_manifest() == manifest
    assert store.remove_orphans(manifest) == []  # the pending manifest is not an orphan
