"""Issue 27, items 1-3: a crafted record must halt its database, never act beyond its own object.

Each test reproduces an attack that worked before the trust rules (docs/security.md): an external
table located at a filesystem root swapping the whole external base dir away, a table's INSERT
writing into another table's directory, event file URIs opened wherever they point (a function's
resources too), and an envelope naming one database while the payload drops another.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from streamer.events.model import (
    CreateFunctionPayload,
    DatabasePayload,
    DatabaseSnapshot,
    Event,
    EventType,
    FileRef,
    FunctionSnapshot,
    ResourceUri,
    TableSnapshot,
)
from streamer.metastore.catalog import REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.files import FileCopier
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.runner import run_plan
from streamer.target.state.state_file import TargetState
from tests.unit.target import builders as b

pytestmark = pytest.mark.timeout(120)


@dataclasses.dataclass
class Box:
    root: Path
    catalog: MemoryCatalog
    applier: Applier
    state: TargetState

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def wh(self) -> Path:
        return self.root / "wh"

    @property
    def ext(self) -> Path:
        return self.root / "ext"

    def run(self, events: list[Event]) -> list[int]:
        plan_ = plan(events, self.applier.load_progress(), self.state.halts())
        return run_plan(self.applier, plan_, self.state).applied


@pytest.fixture
def box(tmp_path: Path) -> Box:
    (tmp_path / "wh").mkdir()
    catalog = MemoryCatalog()
    state = TargetState(tmp_path / "state")
    paths = TargetPaths((tmp_path / "wh").as_uri(), (tmp_path / "ext").as_uri())
    applier = Applier(catalog, FileCopier(max_workers=2), paths, b.SOURCE_ID, state=state)
    return Box(tmp_path, catalog, applier, state)


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def _external(box: Box, name: str, location: str) -> TableSnapshot:
    return b.table("a", name, location=location, table_type="EXTERNAL_TABLE")


# --- item 1: writes -------------------------------------------------------------------------------


@pytest.mark.parametrize("root_location", ["file:///", "hdfs://nn/", "hdfs://nn"])
def test_an_external_table_at_a_filesystem_root_never_swaps_the_base_dir(
    box: Box, root_location: str
) -> None:
    """Before: ``/`` mapped to the external base dir itself, and an INSERT OVERWRITE exchanged the
    whole base dir (built in its parent, outside every root): every other external table's data went."""
    other = _external(box, "other", f"file://{box.src}/other")
    kept = b.write_source_file(box.src / "other", "kept", b"other table's data")
    assert box.run([b.create_db(1, "a"), b.create_table(2, other), b.insert(3, other, [kept])]) == [1, 2, 3]
    before = _tree(box.ext)
    assert list(before.values()) == [b"other table's data"]

    rooted = _external(box, "rooted", root_location)
    new = b.write_source_file(box.src / "rooted", "new", b"x")
    box.run([b.create_table(4, rooted), b.insert(5, rooted, [new], replace=True)])
    assert _tree(box.ext) == before, "another external table's data changed"
    assert not any(p.name.startswith(".ext") for p in box.root.iterdir()), "swap dir built outside the roots"
    assert "a" in box.state.halts()
    assert box.state.halts()["a"].event_id == 4


def test_two_sources_same_path_on_two_namenodes_do_not_collide(box: Box) -> None:
    paths = box.applier.paths
    a = paths.external_location("hdfs://nnA/data/t")
    b_ = paths.external_location("hdfs://nnB/data/t")
    assert a != b_
    assert not a.startswith(b_ + "/") and not b_.startswith(a + "/")


def test_an_insert_into_one_table_never_writes_into_another_tables_directory(box: Box) -> None:
    """Before: an external table's files were placed by their own URI's path, so a file named
    below table B's source location landed in B's target directory."""
    table_a = _external(box, "ta", f"file://{box.src}/ta")
    table_b = _external(box, "tb", f"file://{box.src}/tb")
    mine = b.write_source_file(box.src / "tb", "planted", b"A's bytes in B's dir")
    assert box.run([b.create_db(1, "a"), b.create_table(2, table_a), b.create_table(3, table_b)]) == [1, 2, 3]
    box.run([b.insert(4, table_a, [mine])])
    b_dir = box.catalog.get_table("a", "tb").sd.location  # type: ignore[union-attr]
    b_path = Path(b_dir.removeprefix("file://"))
    assert not (b_path / "planted").exists(), "table A's event wrote into table B's directory"


# --- item 2: reads --------------------------------------------------------------------------------


@pytest.mark.parametrize("checksum", [False, True])
def test_a_file_outside_the_objects_location_is_never_read(box: Box, checksum: bool) -> None:
    """Before: an INSERT naming ``file:///<anything>`` copied it into the warehouse."""
    secret = box.root / "home" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(b"PRIVATE KEY")
    digest = hashlib.sha256(b"PRIVATE KEY").hexdigest() if checksum else None
    ref = FileRef(uri=secret.as_uri(), checksum=digest, checksum_algorithm="sha256" if digest else None)
    t = b.table("a", "t", location=f"file://{box.src}/a.db/t")
    box.run([b.create_db(1, "a"), b.create_table(2, t), b.insert(3, t, [ref])])
    assert not (box.wh / "a.db" / "t" / "id_rsa").exists(), "a file outside the source was copied in"
    halt = box.state.halts()["a"]
    assert halt.event_id == 3 and secret.as_uri() in (halt.object or "") + halt.cause


@pytest.mark.parametrize("uri", ["memory://x/f", "http://127.0.0.1:9/f", "ftp://h/f", "zip://f::file:///x.zip"])
def test_other_schemes_are_refused(box: Box, uri: str) -> None:
    t = b.table("a", "t", location=f"file://{box.src}/a.db/t")
    box.run([b.create_db(1, "a"), b.create_table(2, t), b.insert(3, t, [FileRef(uri=uri, checksum="00" * 32,
                                                                                 checksum_algorithm="sha256")])])
    assert box.state.halts()["a"].event_id == 3


def test_a_data_file_without_a_checksum_halts(box: Box) -> None:
    """Before: a missing checksum only bumped ``streamer_target_files_unverified_total``."""
    t = b.table("a", "t", location=f"file://{box.src}/a.db/t")
    ref = dataclasses.replace(b.write_source_file(box.src / "a.db" / "t", "f", b"data"),
                              checksum=None, checksum_algorithm=None)
    box.run([b.create_db(1, "a"), b.create_table(2, t), b.insert(3, t, [ref])])
    halt = box.state.halts()["a"]
    assert halt.event_id == 3 and "checksum" in halt.cause and ref.uri in (halt.object or "") + halt.cause
    assert not (box.wh / "a.db" / "t" / "f").exists()


@pytest.mark.parametrize("target", ["/etc/passwd", "{root}/keys/.ssh/id_rsa"])
def test_a_function_resource_outside_the_sources_stores_is_never_read(box: Box, target: str) -> None:
    """Before: without --source-prefix a function's own declaration was all a resource needed, so a
    crafted CREATE_FUNCTION copied any file of the target host into ``_functions``."""
    secret = Path(target.format(root=box.root))
    if not secret.exists():
        secret.parent.mkdir(parents=True)
        secret.write_bytes(b"PRIVATE KEY")
    legit = box.src / "lib" / "u.jar"  # the database's warehouse root is {src}: its lib/ is the source's
    legit.parent.mkdir(parents=True)
    legit.write_bytes(b"a jar")
    create_db = b.event(1, EventType.CREATE_DATABASE,
                        DatabasePayload(DatabaseSnapshot("a", location=f"file://{box.src}/a.db")), "a")
    crafted = FunctionSnapshot("f", "a", "C", resource_uris=[ResourceUri("JAR", legit.as_uri()),
                                                             ResourceUri("FILE", secret.as_uri())])
    box.run([create_db, b.event(2, EventType.CREATE_FUNCTION, CreateFunctionPayload(crafted), "a")])
    assert not (box.wh / "_functions").exists(), "a resource was copied"
    assert box.catalog.get_function("a", "f") is None
    halt = box.state.halts()["a"]
    assert halt.event_id == 2 and secret.as_uri() == halt.object
    assert "function a.f" in halt.cause and "--source-prefix" in halt.cause
    # skipped by the operator, the next function, with the source's own jar alone, replicates
    box.state.skip("a", 2)
    fine = FunctionSnapshot("g", "a", "C", resource_uris=[ResourceUri("JAR", legit.as_uri())])
    assert box.run([b.event(3, EventType.CREATE_FUNCTION, CreateFunctionPayload(fine), "a")]) == [3]
    assert (box.wh / "_functions" / "a" / "g" / "u.jar").read_bytes() == b"a jar"
    assert not any(p.name in (secret.name,) for p in (box.wh / "_functions").rglob("*"))


# --- item 3: envelope vs payload ------------------------------------------------------------------


def test_an_envelope_naming_one_database_never_drops_another(box: Box) -> None:
    """Before: ownership was checked on ``event.db`` but DROP_DATABASE acted on the payload's name."""
    box.catalog.create_database(DatabaseSnapshot("foreign", location=str(box.wh / "foreign.db")))
    data = box.wh / "foreign.db" / "t" / "f"
    data.parent.mkdir(parents=True)
    data.write_bytes(b"not replicated")
    drop_foreign = DatabasePayload(DatabaseSnapshot(name="foreign"))
    crafted = b.event(2, EventType.DROP_DATABASE, drop_foreign, db="mine")
    assert box.run([b.create_db(1, "mine")]) == [1]
    box.run([crafted])
    assert box.catalog.get_database("foreign") is not None
    assert data.read_bytes() == b"not replicated"
    assert box.state.halts()["mine"].event_id == 2
    owner = box.catalog.get_database("mine")
    assert owner is not None and owner.parameters[REPL_SOURCE_PARAM] == b.SOURCE_ID


def test_the_codec_refuses_an_envelope_that_disagrees_with_its_payload() -> None:
    from streamer.errors import CodecError, DecodeError, EnvelopeMismatchError
    from streamer.events.codec import EventDeserializer, decode_event, encode_event

    drop_foreign = DatabasePayload(DatabaseSnapshot(name="Foreign"))
    crafted = b.event(7, EventType.DROP_DATABASE, drop_foreign, db="mine")
    with pytest.raises(EnvelopeMismatchError) as raised:
        decode_event(encode_event(crafted))
    error = raised.value
    assert isinstance(error, DecodeError) and isinstance(error, CodecError)
    assert error.event_id == 7 and "mine" in str(error) and "Foreign" in str(error)
    # the target job decodes without the check, so that the applier halts only that database
    assert EventDeserializer(check_envelope=False)(encode_event(crafted)) == crafted
