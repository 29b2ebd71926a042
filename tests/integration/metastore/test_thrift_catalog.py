"""HmsCatalog against a real embedded metastore: every Catalog method round-trips.

Objects written and read back are compared field by field, except what the metastore sets on its
own: ``transient_lastDdlTime`` and ``create_time`` (and locations it fills in when none is given).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

import pytest
from thrift.protocol import TBinaryProtocol

from streamer.embedded_metastore.server import EmbeddedMetastore, free_port
from streamer.events.model import (
    Column,
    ColumnStatistic,
    Constraint,
    DatabaseSnapshot,
    FunctionSnapshot,
    PartitionSnapshot,
    ResourceUri,
    SerDe,
    SortColumn,
    StorageDescriptor,
    TableSnapshot,
)
from streamer.metastore.thrift import (
    CatalogError,
    CatalogUnavailableError,
    CatalogUnsupportedError,
    HmsCatalog,
    ObjectExistsError,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SERVER_PARAMS = {"transient_lastDdlTime"}
PARQUET = SerDe(
    name="pq",
    serialization_lib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
    parameters={"serialization.format": "1"},
)


def _sd(location: str | None) -> StorageDescriptor:
    return StorageDescriptor(
        location=location,
        columns=[Column("id", "bigint", "the key"), Column("name", "string")],
        input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
        output_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
        compressed=False,
        num_buckets=4,
        serde=PARQUET,
        bucket_columns=["id"],
        sort_columns=[SortColumn("id", 1)],
        parameters={"sd.param": "x"},
    )


def _strip_table(t: TableSnapshot | None) -> TableSnapshot:
    assert t is not None
    params = {k: v for k, v in t.parameters.items() if k not in SERVER_PARAMS}
    return dataclasses.replace(t, parameters=params, create_time=None)


def _strip_part(p: PartitionSnapshot | None) -> PartitionSnapshot:
    assert p is not None
    params = {k: v for k, v in p.parameters.items() if k not in SERVER_PARAMS}
    return dataclasses.replace(p, parameters=params, create_time=None)


@pytest.fixture
def db(hms_catalog: HmsCatalog, hms: EmbeddedMetastore) -> Iterator[str]:
    name = f"db_{uuid.uuid4().hex[:8]}"
    hms_catalog.create_database(
        DatabaseSnapshot(name=name, location=(hms.warehouse_dir / f"{name}.db").as_uri())
    )
    yield name
    hms_catalog.drop_database(name)


def _table(db: str, name: str, location: str | None, **kw: object) -> TableSnapshot:
    base = TableSnapshot(
        name=name,
        db=db,
        table_type="MANAGED_TABLE",
        sd=_sd(location),
        partition_keys=[Column("dt", "string", "day"), Column("region", "string")],
        parameters={"owner.note": "kept", "numFiles": "3", "totalSize": "1234"},
        owner="alice",
        last_access_time=0,
        retention=0,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


# --- databases --------------------------------------------------------------------------------


def test_database_round_trip_alter_and_drop(hms_catalog: HmsCatalog, hms: EmbeddedMetastore) -> None:
    name = f"db_{uuid.uuid4().hex[:8]}"
    location = (hms.warehouse_dir / "elsewhere" / f"{name}.db").as_uri()
    snap = DatabaseSnapshot(
        name=name,
        description="sales",
        location=location,
        parameters={"repl.last.id": "5"},
        owner_name="bob",
        owner_type=2,
    )
    hms_catalog.create_database(snap)
    got = hms_catalog.get_database(name)
    assert got is not None
    assert dataclasses.replace(got, location=None) == dataclasses.replace(snap, location=None)
    assert got.location is not None and got.location.rstrip("/").endswith(f"elsewhere/{name}.db")
    assert name in hms_catalog.list_databases()

    with pytest.raises(ObjectExistsError, match=name):
        hms_catalog.create_database(snap)

    altered = dataclasses.replace(got, parameters={"repl.last.id": "9", "x": "y"}, owner_name="carol")
    hms_catalog.alter_database(name, altered)
    assert hms_catalog.get_database(name) == altered

    hms_catalog.drop_database(name)
    assert hms_catalog.get_database(name) is None
    hms_catalog.drop_database(name)  # dropping again is a no-op
    with pytest.raises(CatalogError, match=name):
        hms_catalog.alter_database(name, altered)


def test_threads_sharing_one_connection_take_turns(hms_catalog: HmsCatalog, db: str) -> None:
    """Calls from several threads on one connection each get their own answer (one socket carries
    one call at a time), and closing it meanwhile waits for the call in flight."""
    def reads(n: int) -> list[str]:
        got = []
        for _ in range(n):
            found = hms_catalog.get_database(db)
            got.append(found.name if found is not None else "?")
            assert hms_catalog.get_table(db, "no_such_table") is None
        return got

    with ThreadPoolExecutor(6) as pool:
        results = [f.result() for f in [pool.submit(reads, 40) for _ in range(6)]]
    assert results == [[db] * 40] * 6
    with ThreadPoolExecutor(2) as pool:
        reading = pool.submit(reads, 40)
        for _ in range(5):
            hms_catalog.conn.close()  # the next call reconnects
        assert reading.result() == [db] * 40


def test_missing_objects_are_none(hms_catalog: HmsCatalog, db: str) -> None:
    assert hms_catalog.get_database("no_such_db") is None
    assert hms_catalog.get_table(db, "no_such_table") is None
    assert hms_catalog.get_table("no_such_db", "t") is None
    assert hms_catalog.list_tables("no_such_db") == []
    assert hms_catalog.list_partitions(db, "no_such_table") == []
    assert hms_catalog.get_partition(db, "no_such_table", ["1"]) is None
    assert hms_catalog.get_function(db, "no_such_function") is None
    assert hms_catalog.get_tables("no_such_db", ["t"]) == []
    # drops of missing objects do nothing
    hms_catalog.drop_table(db, "no_such_table")
    hms_catalog.drop_partitions(db, "no_such_table", [["1"]])
    hms_catalog.drop_function(db, "no_such_function")


# --- tables -----------------------------------------------------------------------------------


def test_table_round_trip_keeps_every_field(hms_catalog: HmsCatalog, hms: EmbeddedMetastore, db: str) -> None:
    location = (hms.warehouse_dir / f"{db}.db" / "events").as_uri()
    snap = _table(db, "events", location)
    hms_catalog.create_table(snap)
    got = hms_catalog.get_table(db, "events")
    assert got is not None and got.create_time
    assert "transient_lastDdlTime" in got.parameters
    # what Hive stores vs what we sent: only its own DDL time and the create time differ
    assert _strip_table(got) == dataclasses.replace(
        snap, sd=dataclasses.replace(snap.sd, location=got.sd.location)
    )
    assert got.sd.location is not None and got.sd.location.rstrip("/").endswith(f"{db}.db/events")
    assert hms_catalog.list_tables(db) == ["events"]
    assert hms_catalog.get_tables(db, ["no_such_table", "events"]) == [got]  # one call, the existing ones
    with pytest.raises(ObjectExistsError, match=f"{db}.events"):
        hms_catalog.create_table(snap)
    # through Thrift's C codec (fastbinary), which the round trip above went through
    client = hms_catalog.conn._client
    assert client is not None and isinstance(client._iprot, TBinaryProtocol.TBinaryProtocolAccelerated)
    assert client._iprot._fast_decode is not None


def test_external_table_and_view(hms_catalog: HmsCatalog, tmp_path: Path, db: str) -> None:
    ext = _table(
        db, "ext", (tmp_path / "ext").as_uri(), table_type="EXTERNAL_TABLE", parameters={"EXTERNAL": "TRUE"}
    )
    view = TableSnapshot(
        name="v",
        db=db,
        table_type="VIRTUAL_VIEW",
        sd=StorageDescriptor(columns=[Column("id", "bigint")]),
        view_original_text="select id from ext",
        view_expanded_text=f"select `ext`.`id` from `{db}`.`ext`",
        owner="alice",
        last_access_time=0,
        retention=0,
    )
    hms_catalog.create_table(ext)
    hms_catalog.create_table(view)
    got_ext = _strip_table(hms_catalog.get_table(db, "ext"))
    assert got_ext.table_type == "EXTERNAL_TABLE"
    assert got_ext.sd.location is not None and got_ext.sd.location.rstrip("/").endswith("/ext")
    got_view = _strip_table(hms_catalog.get_table(db, "v"))
    assert got_view.view_original_text == view.view_original_text
    assert got_view.view_expanded_text == view.view_expanded_text
    assert got_view.table_type == "VIRTUAL_VIEW"
    assert sorted(hms_catalog.list_tables(db)) == ["ext", "v"]


def test_create_table_in_missing_database_names_the_table(hms_catalog: HmsCatalog) -> None:
    with pytest.raises(CatalogError, match=r"no_such_db\.t"):
        hms_catalog.create_table(_table("no_such_db", "t", None))


def test_alter_table_changes_schema_and_params(hms_catalog: HmsCatalog, db: str) -> None:
    hms_catalog.create_table(_table(db, "t", None))
    got = hms_catalog.get_table(db, "t")
    assert got is not None
    cols = [*got.sd.columns, Column("extra", "int", "new")]
    changed = dataclasses.replace(
        got,
        sd=dataclasses.replace(got.sd, columns=cols),
        parameters={**got.parameters, "k": "v2"},
        owner="dave",
    )
    hms_catalog.alter_table(db, "t", changed)
    after = hms_catalog.get_table(db, "t")
    assert after is not None
    assert after.sd.columns == cols and after.owner == "dave" and after.parameters["k"] == "v2"


def test_rename_managed_table_keeping_location_moves_its_directory(
    hms_catalog: HmsCatalog, hms: EmbeddedMetastore, db: str
) -> None:
    hms_catalog.create_table(_table(db, "old", None))
    old = hms_catalog.get_table(db, "old")
    assert old is not None and old.sd.location is not None
    old_dir = hms.warehouse_dir / f"{db}.db" / "old"
    (old_dir / "dt=1" / "region=eu").mkdir(parents=True)
    (old_dir / "dt=1" / "region=eu" / "f.parquet").write_bytes(b"x")
    hms_catalog.add_partitions(db, "old", [PartitionSnapshot(values=["1", "eu"], sd=_sd(None))])

    hms_catalog.alter_table(db, "old", dataclasses.replace(old, name="new"))

    assert hms_catalog.get_table(db, "old") is None
    new = hms_catalog.get_table(db, "new")
    assert new is not None and new.sd.location is not None
    assert new.sd.location.rstrip("/").endswith(f"{db}.db/new")
    # Hive moved the directory and rewrote the partition locations itself
    assert (hms.warehouse_dir / f"{db}.db" / "new" / "dt=1" / "region=eu" / "f.parquet").exists()
    assert not old_dir.exists()
    [part] = hms_catalog.list_partitions(db, "new")
    assert part.sd.location is not None and "/new/dt=1/region=eu" in part.sd.location


def test_rename_with_explicit_location_changes_metadata_only(
    hms_catalog: HmsCatalog, hms: EmbeddedMetastore, db: str
) -> None:
    hms_catalog.create_table(_table(db, "a", None))
    a = hms_catalog.get_table(db, "a")
    assert a is not None
    old_dir = hms.warehouse_dir / f"{db}.db" / "a"
    old_dir.mkdir(parents=True, exist_ok=True)
    target = (hms.warehouse_dir / f"{db}.db" / "b_elsewhere").as_uri()
    hms_catalog.alter_table(
        db, "a", dataclasses.replace(a, name="b", sd=dataclasses.replace(a.sd, location=target))
    )
    b = hms_catalog.get_table(db, "b")
    assert b is not None and b.sd.location is not None and b.sd.location.rstrip("/").endswith("b_elsewhere")
    assert old_dir.exists()  # nothing moved


def test_drop_table_keeps_files(hms_catalog: HmsCatalog, hms: EmbeddedMetastore, db: str) -> None:
    hms_catalog.create_table(_table(db, "t", None))
    data = hms.warehouse_dir / f"{db}.db" / "t" / "f.parquet"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_bytes(b"x")
    hms_catalog.drop_table(db, "t")
    assert hms_catalog.get_table(db, "t") is None
    assert data.exists()


# --- partitions -------------------------------------------------------------------------------


def test_partitions_batch_alter_and_drop(hms_catalog: HmsCatalog, hms: EmbeddedMetastore, db: str) -> None:
    hms_catalog.create_table(_table(db, "p", None))
    base = (hms.warehouse_dir / f"{db}.db" / "p").as_uri()
    parts = [
        PartitionSnapshot(
            values=["2024-01-01", "eu"],
            sd=_sd(f"{base}/dt=2024-01-01/region=eu"),
            parameters={"numFiles": "1"},
            last_access_time=0,
        ),
        PartitionSnapshot(
            values=["2024-01-01", "us"], sd=_sd(f"{base}/dt=2024-01-01/region=us"), last_access_time=0
        ),
        PartitionSnapshot(values=["a/b:c", "x=y"], sd=_sd(None), last_access_time=0),
    ]
    hms_catalog.add_partitions(db, "p", parts)
    listed = sorted(hms_catalog.list_partitions(db, "p"), key=lambda p: p.values)
    assert [p.values for p in listed] == sorted(p.values for p in parts)
    got = hms_catalog.get_partition(db, "p", ["2024-01-01", "eu"])
    assert got is not None and got.sd.location == f"file:{urlparse(base).path}/dt=2024-01-01/region=eu"
    expected = dataclasses.replace(
        parts[0], db=db, table="p", sd=dataclasses.replace(parts[0].sd, location=got.sd.location)
    )
    assert _strip_part(got) == expected
    escaped = hms_catalog.get_partition(db, "p", ["a/b:c", "x=y"])
    assert escaped is not None and escaped.sd.location is not None
    assert escaped.sd.location.endswith("dt=a%2Fb%3Ac/region=x%3Dy")

    # a batch with one existing partition fails as a whole: nothing of it is added
    with pytest.raises(CatalogError, match=f"{db}.p"):
        hms_catalog.add_partitions(
            db, "p", [PartitionSnapshot(values=["2024-02-02", "eu"], sd=_sd(None)), parts[0]]
        )
    assert hms_catalog.get_partition(db, "p", ["2024-02-02", "eu"]) is None

    changed = [dataclasses.replace(_strip_part(p), parameters={"numRows": "10"}) for p in listed[:2]]
    hms_catalog.alter_partitions(db, "p", changed)
    for p in changed:
        again = hms_catalog.get_partition(db, "p", p.values)
        assert again is not None and again.parameters.get("numRows") == "10"

    hms_catalog.drop_partitions(db, "p", [["2024-01-01", "us"], ["a/b:c", "x=y"], ["never", "there"]])
    assert [p.values for p in hms_catalog.list_partitions(db, "p")] == [["2024-01-01", "eu"]]


def test_partition_names_match_the_server(hms_catalog: HmsCatalog, hms: EmbeddedMetastore) -> None:
    from hmsclient import hmsclient

    from streamer.hive.files import partition_name

    values = ["a/b", "x=y:z", "50%", "sp ace", "ü", "q?#*'\"[]^{}\\"]
    with hmsclient.HMSClient(host="127.0.0.1", port=hms.port) as client:
        for v in values:
            assert client.partition_name_to_vals(partition_name(["k"], [v])) == [v]


# --- functions, constraints, statistics -------------------------------------------------------


def test_function_round_trip(hms_catalog: HmsCatalog, db: str) -> None:
    fn = FunctionSnapshot(
        name="my_upper",
        db=db,
        class_name="com.example.Upper",
        owner_name="alice",
        owner_type=1,
        resource_uris=[ResourceUri("JAR", "file:///tmp/udf.jar"), ResourceUri("FILE", "file:///tmp/x.txt")],
    )
    hms_catalog.create_function(fn)
    got = hms_catalog.get_function(db, "my_upper")
    assert got is not None and got.create_time
    assert dataclasses.replace(got, create_time=None) == fn
    with pytest.raises(ObjectExistsError):
        hms_catalog.create_function(fn)
    hms_catalog.drop_function(db, "my_upper")
    assert hms_catalog.get_function(db, "my_upper") is None


def test_primary_and_foreign_keys(hms_catalog: HmsCatalog, db: str) -> None:
    parent = _table(db, "parent", None, partition_keys=[])
    child = _table(
        db,
        "child",
        None,
        partition_keys=[],
        sd=dataclasses.replace(
            _sd(None),
            columns=[Column("cid", "bigint"), Column("pid", "bigint")],
            bucket_columns=[],
            sort_columns=[],
            num_buckets=-1,
        ),
    )
    hms_catalog.create_table(parent)
    hms_catalog.create_table(child)
    pk = Constraint("PRIMARY_KEY", "parent_pk", db, "parent", "id", position=1, rely=True)
    fk = Constraint(
        "FOREIGN_KEY",
        "child_fk",
        db,
        "child",
        "pid",
        position=1,
        ref_db=db,
        ref_table="parent",
        ref_column="id",
        ref_name="parent_pk",
        update_rule=0,
        delete_rule=0,
    )
    hms_catalog.add_constraints([pk])
    hms_catalog.add_constraints([fk])
    assert hms_catalog.get_constraints(db, "parent") == [pk]
    assert hms_catalog.get_constraints(db, "child") == [fk]

    unique = Constraint("UNIQUE", "u1", db, "child", "cid")
    with pytest.raises(CatalogUnsupportedError, match=r"UNIQUE.*Hive 2\.3"):
        hms_catalog.add_constraints([Constraint("PRIMARY_KEY", "child_pk", db, "child", "cid"), unique])
    assert hms_catalog.get_constraints(db, "child") == [fk]  # refused before anything changed

    hms_catalog.drop_constraint(db, "child", "child_fk")
    assert hms_catalog.get_constraints(db, "child") == []
    hms_catalog.drop_constraint(db, "child", "child_fk")  # again: no-op


def test_column_statistics(hms_catalog: HmsCatalog, db: str) -> None:
    hms_catalog.create_table(_table(db, "s", None))
    hms_catalog.add_partitions(db, "s", [PartitionSnapshot(values=["d1", "a/b"], sd=_sd(None))])
    table_stats = [
        ColumnStatistic("id", "bigint", "LONG", num_nulls=0, num_distinct=10, low_value="1", high_value="10"),
        ColumnStatistic(
            "name", "string", "STRING", num_nulls=2, num_distinct=8, avg_length=4.5, max_length=12
        ),
    ]
    hms_catalog.update_column_statistics(db, "s", None, table_stats)
    assert (
        sorted(hms_catalog.get_column_statistics(db, "s", None, ["id", "name"]), key=lambda s: s.column)
        == table_stats
    )

    part_stats = [
        ColumnStatistic("id", "bigint", "LONG", num_nulls=1, num_distinct=3, low_value="-2", high_value="7")
    ]
    hms_catalog.update_column_statistics(db, "s", ["d1", "a/b"], part_stats)
    assert hms_catalog.get_column_statistics(db, "s", ["d1", "a/b"], ["id"]) == part_stats

    hms_catalog.delete_column_statistics(db, "s", None, "id")
    assert [s.column for s in hms_catalog.get_column_statistics(db, "s", None, ["id", "name"])] == ["name"]
    hms_catalog.delete_column_statistics(db, "s", None, None)
    assert hms_catalog.get_column_statistics(db, "s", None, ["id", "name"]) == []
    hms_catalog.delete_column_statistics(db, "s", ["d1", "a/b"], "id")
    assert hms_catalog.get_column_statistics(db, "s", ["d1", "a/b"], ["id"]) == []
    hms_catalog.delete_column_statistics(db, "s", ["d1", "a/b"], "id")  # again: no-op

    with pytest.raises(CatalogUnsupportedError, match="TIMESTAMP"):
        hms_catalog.update_column_statistics(db, "s", None, [ColumnStatistic("id", "timestamp", "TIMESTAMP")])


# --- connection -------------------------------------------------------------------------------


def test_reconnects_once_after_a_broken_connection(hms_catalog: HmsCatalog) -> None:
    assert "default" in hms_catalog.list_databases()
    client = hms_catalog.conn._client
    assert client is not None
    client._oprot.trans.close()  # the socket goes away under the catalog
    assert "default" in hms_catalog.list_databases()


def test_unreachable_metastore_is_a_typed_error() -> None:
    with pytest.raises(CatalogUnavailableError, match="cannot connect"):
        HmsCatalog(f"thrift://127.0.0.1:{free_port()}", timeout_s=2)
