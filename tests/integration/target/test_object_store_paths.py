"""Object-store paths against a real S3 API server (moto, 127.0.0.1): hostile event locations write
nothing outside the target's bucket prefixes (DESIGN invariant 7), an INSERT publishes and replays
idempotently, the agent's enrichment and a Hive source's bootstrap read source files on S3, and the
external-table sync mirrors an S3 source onto an S3 target.

The applier runs in this process on the in-memory catalog (the metastore plays no part in where
files go); the filesystem is the real S3 server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from typing import Any

import pytest

from streamer import metrics
from streamer.events.model import (
    DatabaseSnapshot,
    Event,
    FileRef,
    PartitionSnapshot,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.source.enrich import EnrichSettings, FsspecInspector, enrich_ref
from streamer.source.hms_source_catalog import list_files
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import TMP_PREFIX, FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.apply.sources import SourceRules
from streamer.target.job.external_sync import ExternalSync
from streamer.target.state.state_file import TargetState
from tests.fixtures.s3 import S3Server
from tests.unit.target import builders as b

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@dataclasses.dataclass
class Buckets:
    fs: Any
    source: str  # the source's files
    target: str  # roots: <target>/wh and <target>/ext
    other: str  # somebody else's bucket: must stay untouched

    def everything(self) -> set[str]:
        return {str(k) for bucket in (self.source, self.target, self.other) for k in self.fs.find(bucket)}

    def source_file(self, rel: str, content: bytes) -> FileRef:
        self.fs.pipe_file(f"{self.source}/{rel}", content)
        return FileRef(uri=f"s3a://{self.source}/{rel}", checksum=hashlib.sha256(content).hexdigest(),
                       checksum_algorithm="sha256", size=len(content))

    def table(self, location: str, keys: tuple[str, ...] = (), external: bool = False) -> TableSnapshot:
        kind = "EXTERNAL_TABLE" if external else "MANAGED_TABLE"
        snap = b.table("a", "t", keys, location=f"s3a://{self.source}/wh/a.db/t", table_type=kind)
        return dataclasses.replace(snap, sd=dataclasses.replace(snap.sd, location=location))


@pytest.fixture
def buckets(s3_env: S3Server) -> Buckets:
    fs = s3_env.filesystem()
    tag = uuid.uuid4().hex[:8]
    made = Buckets(fs, f"src-{tag}", f"tgt-{tag}", f"other-{tag}")
    for name in (made.source, made.target, made.other):
        fs.mkdir(name)
    fs.pipe_file(f"{made.other}/keep", b"not ours")
    return made


def _run(box: Buckets, tmp: Any, events: list[Event]) -> TargetState:
    state = TargetState(tmp / "state")
    paths = TargetPaths(f"s3a://{box.target}/wh", f"s3a://{box.target}/ext")
    # the source bucket is the source's declared store (--source-prefix): what is tested here are writes
    applier = Applier(MemoryCatalog(), FileCopier(max_workers=2, roots=paths.roots), paths, b.SOURCE_ID,
                      state=state, sources=SourceRules((f"s3a://{box.source}",)))
    run_plan(applier, plan(events, applier.load_progress(), state.halts()), state)
    return state


def _audit(box: Buckets, before: set[str]) -> None:
    for key in box.everything() - before:
        inside = key.startswith((f"{box.target}/wh/", f"{box.target}/ext/"))
        assert inside, f"written outside the roots: {key}"
    assert {str(k) for k in box.fs.find(box.other)} == {f"{box.other}/keep"}


ESCAPING = [
    "s3a://{other}/wh/a.db/t",  # another bucket: mapped (external) or derived (managed), never written
    "s3://{other}/x",
    "s3a://{source}/wh/a.db/../../../{other}/x",
    "s3a://{source}/wh/%2e%2e/%2e%2e/{other}",
    "hdfs://nn/{other}/x",
    "file:///{other}/x",
]


@pytest.mark.parametrize("external", [False, True], ids=["managed", "external"])
@pytest.mark.parametrize("template", ESCAPING)
def test_hostile_table_locations_write_nothing_outside_the_bucket_roots(
    buckets: Buckets, tmp_path: Any, template: str, external: bool
) -> None:
    location = template.format(other=buckets.other, source=buckets.source)
    snap = buckets.table(location, external=external)
    ref = buckets.source_file("wh/a.db/t/f", b"payload")
    before = buckets.everything()
    state = _run(buckets, tmp_path, [b.create_db(1, "a"), b.create_table(2, snap), b.insert(3, snap, [ref])])
    _audit(buckets, before)
    if external and (".." in location or "%2e" in location):
        halt = state.halts()["a"]
        assert halt.event_id == 2 and "segment" in halt.cause, halt
        return
    if external:  # every location here is on another bucket or filesystem than the declared store
        halt = state.halts()["a"]
        assert halt.event_id == 2 and "no --source-prefix names" in halt.cause, halt
        return
    assert not state.halts(), state.halts()
    if not external:  # managed: derived from the names, whatever the event's location said
        assert buckets.fs.cat_file(f"{buckets.target}/wh/a.db/t/f") == b"payload"


@pytest.mark.parametrize("name", ["../../../x", "%2e%2e/%2e%2e/x", ".streamer-tmp-x"])
def test_hostile_file_names_halt_naming_the_event(buckets: Buckets, tmp_path: Any, name: str) -> None:
    snap = buckets.table(f"s3a://{buckets.source}/wh/a.db/t")
    real = buckets.source_file("wh/a.db/t/f", b"payload")
    ref = dataclasses.replace(real, uri=real.uri.rsplit("/", 1)[0] + "/" + name)
    before = buckets.everything()
    state = _run(buckets, tmp_path, [b.create_db(1, "a"), b.create_table(2, snap), b.insert(3, snap, [ref])])
    _audit(buckets, before)
    halt = state.halts()["a"]
    assert halt.event_id == 3 and halt.object and name.split("/")[-1] in halt.object, halt


def test_hostile_partition_location_in_another_bucket(buckets: Buckets, tmp_path: Any) -> None:
    snap = buckets.table(f"s3a://{buckets.source}/wh/a.db/t", keys=("dt",), external=True)
    part = PartitionSnapshot(values=["x"], db="a", table="t",
                             sd=StorageDescriptor(location=f"s3a://{buckets.other}/../x"))
    ref = buckets.source_file("wh/a.db/t/dt=x/f", b"payload")
    before = buckets.everything()
    events = [b.create_db(1, "a"), b.create_table(2, snap), b.add_partition(3, snap, [part], [ref])]
    state = _run(buckets, tmp_path, events)
    _audit(buckets, before)
    assert state.halts()["a"].event_id == 3


def test_insert_overwrite_and_replay_on_s3(buckets: Buckets, tmp_path: Any) -> None:
    """Files publish verified under their names; the overwrite leaves only its files; a replay of the
    same events changes nothing and copies nothing; no staging object is left."""
    snap = buckets.table(f"s3a://{buckets.source}/wh/a.db/t")
    one = buckets.source_file("wh/a.db/t/one", b"1" * 10)
    two = buckets.source_file("wh/a.db/t/two", b"2" * 20)
    three = buckets.source_file("wh/a.db/t/three", b"3" * 30)
    events = [b.create_db(1, "a"), b.create_table(2, snap), b.insert(3, snap, [one, two]),
              b.insert(4, snap, [three], replace=True)]
    counted = _sample("streamer_target_nonatomic_publishes_total", db="a")
    state = _run(buckets, tmp_path, events)
    assert not state.halts()
    table = f"{buckets.target}/wh/a.db/t"
    assert sorted(buckets.fs.ls(table)) == [f"{table}/three"]
    assert buckets.fs.cat_file(f"{table}/three") == b"3" * 30
    # two files appearing one by one, then an overwrite removing old files after the new one
    assert _sample("streamer_target_nonatomic_publishes_total", db="a") - counted == 2
    # a crash after the overwrite's publish, before its progress was recorded: replayed, it copies
    # nothing and leaves the same objects
    copied = _sample("streamer_target_bytes_copied_total")
    state = _run(buckets, tmp_path / "replay", [*events[:2], events[3]])
    assert not state.halts()
    assert sorted(buckets.fs.ls(table)) == [f"{table}/three"]
    assert _sample("streamer_target_bytes_copied_total") == copied
    assert not [k for k in buckets.everything() if TMP_PREFIX in k]


def _sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_mismatched_source_file_on_s3_publishes_nothing(buckets: Buckets, tmp_path: Any) -> None:
    snap = buckets.table(f"s3a://{buckets.source}/wh/a.db/t")
    good = buckets.source_file("wh/a.db/t/good", b"good")
    bad = dataclasses.replace(buckets.source_file("wh/a.db/t/bad", b"bad"), checksum="0" * 64)
    state = _run(buckets, tmp_path, [b.create_db(1, "a"), b.create_table(2, snap),
                                     b.insert(3, snap, [good, bad])])
    halt = state.halts()["a"]
    assert halt.event_id == 3 and "no copy matches" in halt.cause and "bad" in (halt.object or ""), halt
    assert [k for k in buckets.fs.find(buckets.target)] == []


def test_enrichment_reads_source_files_on_s3(buckets: Buckets) -> None:
    """The agent checksums a source file it names by an s3a:// URI (a Hive location's spelling)."""
    content = b"x" * 5000
    buckets.fs.pipe_file(f"{buckets.source}/wh/a.db/t/f", content)
    ref = enrich_ref(FileRef(uri=f"s3a://{buckets.source}/wh/a.db/t/f"), EnrichSettings(), FsspecInspector())
    assert ref.checksum == hashlib.sha256(content).hexdigest() and ref.size == len(content)
    gone = enrich_ref(FileRef(uri=f"s3a://{buckets.source}/wh/a.db/t/missing"), EnrichSettings(),
                      FsspecInspector())
    assert gone.checksum is None and gone.size is None


def test_bootstrap_lists_source_files_on_s3_in_the_locations_spelling(buckets: Buckets) -> None:
    """A Hive source's bootstrap lists each location's files: ``s3a://`` stays ``s3a://`` (s3fs itself
    says ``s3://``), hidden and staging names and what is below them are skipped."""
    for rel in ("f1", "dt=x/f2", ".hidden", "_SUCCESS", ".staging/f3", "dt=x/.streamer-tmp-f4"):
        buckets.fs.pipe_file(f"{buckets.source}/wh/a.db/t/{rel}", b"data")
    location = f"s3a://{buckets.source}/wh/a.db/t"
    got = [(f.uri, f.size) for f in list_files(location + "/")]
    assert got == [(f"{location}/dt=x/f2", 4), (f"{location}/f1", 4)]


def test_external_sync_mirrors_an_s3_source_onto_an_s3_target(buckets: Buckets) -> None:
    """Files changed without events on an S3 source are mirrored each cycle; the second listing sees
    the changes (s3fs's listing cache is off)."""
    paths = TargetPaths(f"s3a://{buckets.target}/wh", f"s3a://{buckets.target}/ext")
    source_dir = f"{buckets.source}/data/ext"
    for name, content in (("a", b"one"), ("b", b"two"), (".hidden", b"skip")):
        buckets.fs.pipe_file(f"{source_dir}/{name}", content)
    catalog = MemoryCatalog()
    catalog.create_database(DatabaseSnapshot("db", parameters={REPL_SOURCE_PARAM: b.SOURCE_ID}))
    location = paths.external_location(f"s3a://{source_dir}")
    assert location == f"s3a://{buckets.target}/ext/s3/{buckets.source}/data/ext"  # <scheme>/<bucket>
    catalog.create_table(TableSnapshot("ext", "db", "EXTERNAL_TABLE", StorageDescriptor(location=location),
                                       parameters={REPL_SOURCE_PARAM: b.SOURCE_ID}))
    declared = SourceRules((f"s3a://{buckets.source}",))  # a sync reads only below a declared store
    copier = FileCopier(roots=paths.roots, sources=declared)
    sync = ExternalSync(catalog, paths, b.SOURCE_ID, copier=copier, source_prefix=f"s3a://{buckets.source}")
    target_dir = f"{buckets.target}/ext/s3/{buckets.source}/data/ext"

    def mirrored() -> dict[str, bytes]:
        return {k.rsplit("/", 1)[-1]: buckets.fs.cat_file(k) for k in buckets.fs.find(target_dir)}

    report = sync.sync_once()
    assert (report.copied, report.deleted, report.failures) == (2, 0, {}), report
    assert mirrored() == {"a": b"one", "b": b"two"}
    buckets.fs.pipe_file(f"{source_dir}/a", b"ONE!")
    buckets.fs.rm_file(f"{source_dir}/b")
    buckets.fs.pipe_file(f"{source_dir}/c", b"three")
    report = sync.sync_once()
    assert (report.copied, report.deleted) == (2, 1), report
    assert mirrored() == {"a": b"ONE!", "c": b"three"}
    assert sync.sync_once().copied == 0
