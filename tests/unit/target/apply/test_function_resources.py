"""Function resources copied into the target's functions dir, and removed with the function; read
only from the source's stores: below a declared prefix, else below what the target recorded of its
database's source location (docs/security.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamer.errors import PathEscapeError, StreamerError, UntrustedSourceError
from streamer.events.model import (
    AlterDatabasePayload,
    CreateFunctionPayload,
    DatabasePayload,
    DatabaseSnapshot,
    Event,
    EventType,
    FunctionSnapshot,
    ResourceUri,
)
from streamer.metastore.memory import MemoryCatalog
from streamer.target.apply.applier import Applier
from streamer.target.apply.by_state import SOURCE_LOCATION_PARAM
from streamer.target.apply.context import ApplyContext
from streamer.target.apply.door import copy_resources, remove_tree
from streamer.target.apply.files import FileCopier
from streamer.target.apply.function_resources import resource_dir
from streamer.target.apply.paths import TargetPaths
from streamer.target.apply.plan import plan
from streamer.target.apply.sources import SourceRules
from tests.unit.target import builders as b


def _side(paths: TargetPaths, copier: FileCopier | None = None) -> ApplyContext:
    """The apply context the door works for: no database of the catalog is another source's."""
    return ApplyContext(MemoryCatalog(), copier or FileCopier(), paths, b.SOURCE_ID)


def _jar(path: Path, content: bytes = b"jar bytes") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def test_resources_are_copied_renamed_and_removed(tmp_path: Path) -> None:
    paths = TargetPaths((tmp_path / "wh").as_uri())
    jar = _jar(tmp_path / "src" / "lib" / "u.jar")
    fn = FunctionSnapshot("up", "db", "com.x.Up", resource_uris=[ResourceUri("JAR", f"file:{jar}")])
    copier = FileCopier(roots=paths.roots, sources=SourceRules())
    copied = copy_resources(_side(paths, copier), fn, event_id=7, db_location=f"file:{tmp_path}/src/db.db")
    (res,) = copied.resource_uris
    assert res == ResourceUri("JAR", resource_dir(paths, "db", "up") + "/u.jar")
    target = tmp_path / "wh" / "_functions" / "db" / "up" / "u.jar"
    assert target.read_bytes() == b"jar bytes"
    assert copy_resources(_side(paths), copied.__class__("f", "db", "C")).resource_uris == []
    remove_tree(_side(paths), resource_dir(paths, "db", "up"))
    assert not target.parent.exists()
    remove_tree(_side(paths), resource_dir(paths, "db", "up"))  # a replay: absent is fine


def test_bad_resource_names_are_refused(tmp_path: Path) -> None:
    paths = TargetPaths((tmp_path / "wh").as_uri())
    twice = [ResourceUri("JAR", "file:/a/u.jar"), ResourceUri("JAR", "file:/b/u.jar")]
    with pytest.raises(PathEscapeError, match="named alike"):
        copy_resources(_side(paths), FunctionSnapshot("f", "db", "C", resource_uris=twice))
    with pytest.raises(PathEscapeError):
        resource_dir(paths, "..", "f")


def test_a_refused_resource_names_the_event_the_function_and_what_to_declare(tmp_path: Path) -> None:
    paths = TargetPaths((tmp_path / "wh").as_uri())
    jar = _jar(tmp_path / "elsewhere" / "u.jar")
    fn = FunctionSnapshot("up", "db", "com.x.Up", resource_uris=[ResourceUri("JAR", jar.as_uri())])
    copier = FileCopier(roots=paths.roots, sources=SourceRules())
    with pytest.raises(UntrustedSourceError) as raised:
        copy_resources(_side(paths, copier), fn, event_id=7, db_location=f"file:{tmp_path}/src/db.db")
    error = raised.value
    assert error.event_id == 7 and error.obj == jar.as_uri()
    assert "function db.up" in error.cause and "--source-prefix" in error.cause
    assert not (tmp_path / "wh" / "_functions").exists()


# --- through the applier: the database's events record where the source keeps it ------------------


class Target:
    def __init__(self, root: Path, rules: SourceRules | None = None) -> None:
        self.root = root
        self.catalog = MemoryCatalog()
        paths = TargetPaths((root / "wh").as_uri())
        self.applier = Applier(self.catalog, FileCopier(max_workers=1), paths, b.SOURCE_ID, sources=rules)

    def apply(self, *events: Event) -> None:
        for step in plan(list(events), self.applier.load_progress()).steps:
            self.applier.apply(step)

    def copied(self, db: str, fn: str) -> list[str]:
        d = self.root / "wh" / "_functions" / db / fn
        return sorted(p.name for p in d.iterdir()) if d.exists() else []


def _create_db(event_id: int, name: str, location: str | None, **params: str) -> Event:
    snap = DatabaseSnapshot(name, location=location, parameters=dict(params))
    return b.event(event_id, EventType.CREATE_DATABASE, DatabasePayload(snap), db=name)


def _create_fn(event_id: int, db: str, name: str, *uris: str) -> Event:
    fn = FunctionSnapshot(name, db, "com.x.Up", resource_uris=[ResourceUri("JAR", u) for u in uris])
    return b.event(event_id, EventType.CREATE_FUNCTION, CreateFunctionPayload(fn), db=db)


def test_the_workloads_jars_replicate_by_the_derived_default(tmp_path: Path) -> None:
    """The bundled warehouse keeps databases in ``<root>/<db>.db`` and jars in ``<root>/lib``."""
    src = tmp_path / "src"
    jar = _jar(src / "lib" / "udfs.jar")
    target = Target(tmp_path)
    target.apply(_create_db(1, "sales", f"file:{src}/sales.db"), _create_fn(2, "sales", "up", f"file:{jar}"))
    db = target.catalog.get_database("sales")
    assert db is not None and db.parameters[SOURCE_LOCATION_PARAM] == f"file:{src}/sales.db"
    assert target.copied("sales", "up") == ["udfs.jar"]


def test_the_record_follows_the_databases_events_never_a_functions(tmp_path: Path) -> None:
    src = tmp_path / "src"
    target = Target(tmp_path)
    foreign = {SOURCE_LOCATION_PARAM: "file:///"}  # another replica's record, in the source's own parameters
    target.apply(_create_db(1, "sales", f"file:{src}/sales.db", **foreign))
    db = target.catalog.get_database("sales")
    assert db is not None and db.parameters[SOURCE_LOCATION_PARAM] == f"file:{src}/sales.db"
    before, after = DatabaseSnapshot("sales"), DatabaseSnapshot("sales", parameters={"k": "v", **foreign})
    target.apply(b.event(2, EventType.ALTER_DATABASE, AlterDatabasePayload(before, after), db="sales"))
    db = target.catalog.get_database("sales")
    assert db is not None and db.parameters[SOURCE_LOCATION_PARAM] == f"file:{src}/sales.db"  # kept


def test_a_function_of_a_database_without_a_record_needs_a_declared_prefix(tmp_path: Path) -> None:
    """A Hive 2.3 CREATE_DATABASE message names no location: nothing is derived, the database halts
    on the function's resources, and a declared ``--source-prefix`` lets them through."""
    jar = _jar(tmp_path / "src" / "lib" / "u.jar")
    target = Target(tmp_path)
    target.apply(_create_db(1, "sales", None))
    with pytest.raises(StreamerError, match="declare --source-prefix") as raised:
        target.apply(_create_fn(2, "sales", "up", f"file:{jar}"))
    assert isinstance(raised.value, UntrustedSourceError) and raised.value.event_id == 2
    assert target.copied("sales", "up") == [] and target.catalog.get_function("sales", "up") is None
    declared = Target(tmp_path / "other", SourceRules(((tmp_path / "src").as_uri(),)))
    declared.apply(_create_db(1, "sales", None), _create_fn(2, "sales", "up", f"file:{jar}"))
    assert declared.copied("sales", "up") == ["u.jar"]
