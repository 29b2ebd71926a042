"""The three rules of docs/security.md one by one: what may be read (``sources``), what may be
written (``guard``), and which external layout a base dir holds (``layout``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamer.errors import ConfigError, PathEscapeError, UntrustedSourceError
from streamer.events.model import FileRef
from streamer.target.apply.guard import check_write, object_root
from streamer.target.apply.layout import MARKER, check_external_layout, recorded_layout
from streamer.target.apply.paths import Root, TargetPaths
from streamer.target.apply.sources import SourceRules, derived_resource_roots

CHK = hashlib.sha256(b"x").hexdigest()
LOC = "hdfs://nn:8020/wh/a.db/t"


def ref(uri: str, checksum: str | None = CHK, cm: str | None = None) -> FileRef:
    return FileRef(uri, checksum, "sha256" if checksum else None, cm)


# --- reads ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("uri", [f"{LOC}/f", f"{LOC}/p=1/f", "hdfs://nn:8020/wh/a.db/t/delta_1_1/bucket_0"])
def test_by_default_a_file_is_read_from_below_its_objects_location(uri: str) -> None:
    SourceRules().check(ref(uri), LOC)


@pytest.mark.parametrize(
    ("uri", "location", "why"),
    [
        ("hdfs://nn:8020/wh/a.db/u/f", LOC, "not below the location"),
        ("hdfs://other:8020/wh/a.db/t/f", LOC, "not below the location"),  # another namenode
        (LOC, LOC, "not below the location"),  # the directory itself
        ("file:///etc/passwd", LOC, "not below the location"),
        ("hdfs://nn:8020/wh/a.db/t/../u/f", LOC, "segment"),
        ("hdfs://nn:8020/wh/a.db/t/%2e%2e/u/f", LOC, "segment"),
        ("hdfs://nn:8020/x", "hdfs://nn:8020/", "root of its filesystem"),
        ("hdfs://nn:8020/wh/a.db/t/f", None, "names no location"),
        ("http://nn/wh/a.db/t/f", "http://nn/wh/a.db/t", "not a source filesystem"),
        ("memory://wh/a.db/t/f", "memory://wh/a.db/t", "not a source filesystem"),
        ("zip://f::file:///wh/a.db/t/x.zip", "file:///wh/a.db/t", "chains"),
        ("file://evil/wh/a.db/t/f", "file://evil/wh/a.db/t", "host"),
        ("hdfs://nn:8020/wh/a.db/t/f?x=1", LOC, "query"),
    ],
)
def test_a_file_elsewhere_is_refused_naming_it(uri: str, location: str | None, why: str) -> None:
    with pytest.raises(UntrustedSourceError, match=why) as raised:
        SourceRules().check(ref(uri), location, event_id=4)
    assert (raised.value.event_id, raised.value.obj) == (4, uri)


def test_declared_prefixes_replace_the_objects_location() -> None:
    rules = SourceRules(("hdfs://nn:8020/wh", "http://mirror/jars"))
    rules.check(ref("hdfs://nn:8020/wh/a.db/u/f"), LOC)  # another table's directory, still the source's
    rules.check(ref("http://mirror/jars/u.jar"), None, resource=True)  # a prefix may name any scheme
    with pytest.raises(UntrustedSourceError, match="no --source-prefix"):
        rules.check(ref("hdfs://nn:8020/elsewhere/f"), "hdfs://nn:8020/elsewhere")
    with pytest.raises(UntrustedSourceError, match="no --source-prefix"):
        rules.check(ref("hdfs://nn:8020/lib/u.jar", None), None, resource=True)


def test_a_file_without_a_checksum_is_refused_unless_allowed() -> None:
    with pytest.raises(UntrustedSourceError, match="no checksum"):
        SourceRules().check(ref(f"{LOC}/f", None), LOC)
    SourceRules(allow_unverified=True).check(ref(f"{LOC}/f", None), LOC)
    # Hive records none for a function resource: none is asked for
    SourceRules().check(ref("hdfs://nn:8020/wh/lib/u.jar", None), "hdfs://nn:8020/wh/a.db", resource=True)


def test_cmroot_copies_are_named_for_their_file_or_below_a_declared_cmroot() -> None:
    SourceRules().check(ref(f"{LOC}/f", cm=f"hdfs://nn:8020/cmroot/f_{CHK}"), LOC)
    for cm in (f"hdfs://nn:8020/cmroot/g_{CHK}", "hdfs://nn:8020/cmroot/f_0000",
               f"hdfs://other/cmroot/f_{CHK}", f"file:///etc/f_{CHK}", f"http://h/f_{CHK}"):
        with pytest.raises(UntrustedSourceError):
            SourceRules().check(ref(f"{LOC}/f", cm=cm), LOC)
    declared = SourceRules(cmroots=("hdfs://nn:8020/cmroot",))
    declared.check(ref(f"{LOC}/f", cm="hdfs://nn:8020/cmroot/anything"), LOC)
    with pytest.raises(UntrustedSourceError, match="no --source-cmroot"):
        declared.check(ref(f"{LOC}/f", cm=f"hdfs://nn:8020/elsewhere/f_{CHK}"), LOC)


def test_hive_2_cmroot_copies_are_named_by_their_checksum_alone() -> None:
    """Hive 2.3's ReplChangeManager.getCMPath names a copy by the checksum string alone, cut to one
    HDFS path component (255 characters) when longer."""
    SourceRules().check(ref(f"{LOC}/f", cm=f"hdfs://nn:8020/cmroot/{CHK}"), LOC)
    long = "ab" * 200
    SourceRules().check(ref(f"{LOC}/f", long, cm=f"hdfs://nn:8020/cmroot/{long[:254]}"), LOC)
    for cm in (f"hdfs://nn:8020/cmroot/{long}", f"hdfs://other/cmroot/{CHK}", f"file:///etc/{CHK}",
               f"hdfs://nn:8020/cmroot/{CHK}0"):
        with pytest.raises(UntrustedSourceError, match="cmroot copy"):
            SourceRules().check(ref(f"{LOC}/f", long if long in cm else CHK, cm=cm), LOC)


# --- function resources: below a declared prefix, else below stores derived from the source record ----

DB_LOC = "hdfs://nn:8020/wh/a.db"  # the source location the target recorded for the function's database


@pytest.mark.parametrize(
    "uri", ["hdfs://nn:8020/wh/lib/u.jar", "hdfs://nn:8020/wh/a.db/jars/u.jar", "hdfs://nn:8020/wh/b.db/u.jar"]
)
def test_a_resource_is_read_below_its_databases_recorded_location_or_warehouse_root(uri: str) -> None:
    SourceRules().check(ref(uri, None), DB_LOC, resource=True)


@pytest.mark.parametrize(
    ("uri", "location"),
    [
        ("file:///etc/passwd", DB_LOC),  # the target host's files: the source's stores are not file: ones
        ("hdfs://nn:8020/lib/u.jar", DB_LOC),  # beside the warehouse root, not below it
        ("hdfs://other:8020/wh/lib/u.jar", DB_LOC),  # another namenode
        ("hdfs://nn:8020/wh", DB_LOC),  # the warehouse root itself
        ("hdfs://nn:8020/wh/lib/u.jar", None),  # the database recorded no location
        ("hdfs://nn:8020/x/u.jar", "hdfs://nn:8020/"),  # a filesystem's root derives nothing
        ("hdfs://nn:8020/x/u.jar", "hdfs://nn:8020/a.db"),  # nor a warehouse root that is one
        ("hdfs://nn:8020/data/u.jar", "hdfs://nn:8020/data/custom"),  # no <name>.db: no warehouse root
        ("hdfs://nn:8020/wh/../etc/u.jar", DB_LOC),
        ("hdfs://nn:8020/wh/lib/u.jar", "hdfs://nn:8020/wh/../x/a.db"),  # a bad record derives nothing
        ("http://nn/wh/lib/u.jar", "http://nn/wh/a.db"),
    ],
)
def test_a_resource_elsewhere_is_refused_naming_what_to_declare(uri: str, location: str | None) -> None:
    with pytest.raises(UntrustedSourceError) as raised:
        SourceRules().check(ref(uri, None), location, resource=True, event_id=9)
    error = raised.value
    assert (error.event_id, error.obj) == (9, uri)
    assert any(why in error.cause for why in ("--source-prefix", "not a source filesystem", "segment"))


def test_local_resources_are_read_when_the_sources_stores_are_local() -> None:
    """The demo and the bundled warehouse: ``file:`` databases, jars in ``<root>/lib``."""
    SourceRules().check(ref("file:/srv/wh/lib/udfs.jar", None), "file:/srv/wh/sales.db", resource=True)
    SourceRules().check(ref("file:///srv/wh/lib/udfs.jar", None), "/srv/wh/sales.db", resource=True)
    with pytest.raises(UntrustedSourceError):
        SourceRules().check(ref("file:///etc/passwd", None), "file:/srv/wh/sales.db", resource=True)


def test_declared_cmroots_are_resource_stores_and_prefixes_replace_the_derived_ones() -> None:
    cmroot = SourceRules(cmroots=("hdfs://nn:8020/cm",))
    cmroot.check(ref("hdfs://nn:8020/cm/u.jar", None), None, resource=True)
    with pytest.raises(UntrustedSourceError, match="no --source-prefix"):
        SourceRules(("hdfs://nn:8020/jars",)).check(ref("hdfs://nn:8020/wh/lib/u.jar", None), DB_LOC,
                                                    resource=True)
    assert derived_resource_roots(DB_LOC) == (Root.parse(DB_LOC), Root.parse("hdfs://nn:8020/wh"))
    assert derived_resource_roots("hdfs://nn:8020/wh/a.db/x.db") == (
        Root.parse("hdfs://nn:8020/wh/a.db/x.db"), Root.parse("hdfs://nn:8020/wh/a.db"))


_SEGMENTS = st.sampled_from(["wh", "lib", "a.db", "b.db", ".db", "data", "etc", "..", "%2e%2e", "x"])
_STORES = st.sampled_from(["hdfs://nn:8020", "hdfs://other", "s3a://bucket", "file://", "file:", "", "http://h"])


@st.composite
def _urls(draw: st.DrawFn) -> str:
    return draw(_STORES) + "/" + "/".join(draw(st.lists(_SEGMENTS, max_size=4)))


def _oracle(uri: str, location: str) -> bool:
    """Accepted iff a well-formed store URL strictly below the location, or below its parent when the
    location is ``<parent>/<name>.db`` and the parent is no filesystem root (same filesystem)."""
    def split(url: str) -> tuple[str, str]:
        for store in ("hdfs://nn:8020", "hdfs://other", "s3a://bucket", "file://", "file:", "http://h", ""):
            if url.startswith(store + "/"):
                return ("file" if store in ("file://", "file:", "") else store), url[len(store):]
        raise AssertionError(url)

    (fs_u, path_u), (fs_l, path_l) = split(uri), split(location)
    segments = path_u.split("/")[1:] + path_l.split("/")[1:]
    if fs_u != fs_l or "http://h" in (fs_u, fs_l) or {"..", "%2e%2e"} & set(segments) or "" in segments:
        return False
    bases = [path_l] if path_l != "/" else []
    parent, _, name = path_l.rpartition("/")
    if bases and name.endswith(".db") and name != ".db" and parent:
        bases.append(parent)
    return any(path_u.startswith(base + "/") for base in bases)


@given(uri=_urls(), location=_urls())
def test_no_resource_outside_the_derived_stores_is_ever_read(uri: str, location: str) -> None:
    try:
        SourceRules().check(ref(uri, None), location, resource=True)
        accepted = True
    except UntrustedSourceError:
        accepted = False
    assert accepted == _oracle(uri, location), (uri, location)


def test_nothing_is_read_from_inside_a_target_root() -> None:
    roots = [Root.parse("hdfs://nn:8020/wh")]
    with pytest.raises(UntrustedSourceError, match="inside a target root"):
        SourceRules().check(ref(f"{LOC}/f"), LOC, target_roots=roots)


def test_a_bad_declaration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--source-prefix"):
        SourceRules(("hdfs://nn/a/../b",))
    with pytest.raises(ConfigError, match="--source-cmroot"):
        SourceRules(cmroots=("relative/path",))


# --- writes ---------------------------------------------------------------------------------------

ROOTS = [Root.parse("file:///t/wh"), Root.parse("file:///t/ext")]


def test_an_objects_directory_and_below_it_may_change() -> None:
    check_write("file:///t/wh/a.db/t", "file:///t/wh/a.db/t", ROOTS)
    check_write("file:/t/wh/a.db/t/p=1/f", "file:///t/wh/a.db/t", ROOTS)  # both spellings, one place
    assert object_root("/t/ext/file/_/x", ROOTS) == ROOTS[1]


@pytest.mark.parametrize(
    ("url", "obj_dir", "why"),
    [
        ("file:///t/wh", "file:///t/wh", "root itself"),
        ("file:///t/ext/f", "file:///t/ext", "root itself"),
        ("file:///t/other/f", "file:///t/other", "outside the target roots"),
        ("file:///t/wh/a.db/u/f", "file:///t/wh/a.db/t", "not inside"),  # another table's directory
        ("file:///t/wh/a.db/t/../u/f", "file:///t/wh/a.db/t", "not inside"),
        ("hdfs://nn/t/wh/a.db/t/f", "file:///t/wh/a.db/t", "not inside"),
        ("file:///t/wh/a.db/t/f", "file:///t/wh/a.db/../x", "outside"),
    ],
)
def test_anything_else_is_refused(url: str, obj_dir: str, why: str) -> None:
    with pytest.raises(PathEscapeError, match=why):
        check_write(url, obj_dir, ROOTS, event_id=3)


# --- the external layout a base dir holds ---------------------------------------------------------


def test_a_new_base_dir_records_its_layout_and_keeps_it(tmp_path: Path) -> None:
    paths = TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext"))
    check_external_layout(paths)
    assert (tmp_path / "ext" / MARKER).read_text() == "authority\n"
    check_external_layout(paths)  # again: the same
    with pytest.raises(ConfigError, match="'authority' layout"):
        check_external_layout(TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext"), "path"))


def test_a_base_dir_written_before_the_marker_holds_the_path_layout(tmp_path: Path) -> None:
    (tmp_path / "ext" / "data" / "t").mkdir(parents=True)
    (tmp_path / "ext" / "data" / "t" / "f").write_bytes(b"an older replica's external data")
    new = TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext"))
    assert recorded_layout(new) == "path"
    with pytest.raises(ConfigError, match="--external-layout path"):
        check_external_layout(new)
    assert not (tmp_path / "ext" / MARKER).exists()
    check_external_layout(TargetPaths(str(tmp_path / "wh"), str(tmp_path / "ext"), "path"))
    assert (tmp_path / "ext" / MARKER).read_text() == "path\n"


def test_no_external_base_dir_needs_no_layout(tmp_path: Path) -> None:
    check_external_layout(TargetPaths(str(tmp_path / "wh")))
    assert not any(tmp_path.iterdir())
