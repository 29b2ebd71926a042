"""What a checked read of a live replica tells apart (issue 40, items 8 and 9): a file that vanished
under a Spark query (a race, read again) from the query's own errors; a lazy result (refused) from
data; a query during which its tables changed; and a snapshot used as a mapping."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark import RDD
from pyspark.sql import Row
from pyspark.sql.classic.column import Column as SparkColumn
from pyspark.sql.classic.dataframe import DataFrame
from pyspark.sql.group import GroupedData

from streamer.events.model import Column, DatabaseSnapshot, StorageDescriptor, TableSnapshot
from streamer.metastore.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.metastore.memory import MemoryCatalog
from streamer.read import (
    PinnedTable,
    Snapshot,
    Thrown,
    lazy_part,
    refuse_lazy,
    resolve,
    throwable_trail,
    vanished_file,
)
from streamer.read.sql import _Done, _run

# --- a vanished file ---------------------------------------------------------------------------------

# what PySpark 4 raises when a listed file is gone at read time: a Py4JJavaError around Spark's
# SparkException (condition FAILED_READ_FILE.FILE_NOT_EXIST) around java.io.FileNotFoundException
SPARK4 = [
    Thrown("Py4JJavaError", None, "An error occurred while calling o43.count."),
    Thrown("org.apache.spark.SparkException", "FAILED_READ_FILE.FILE_NOT_EXIST",
           "[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while reading file file:///w/t/part-0"),
    Thrown("java.io.FileNotFoundException", None, "File file:/w/t/part-0 does not exist"),
]


@pytest.mark.parametrize("trail", [
    SPARK4,
    SPARK4[2:],  # the Java cause alone
    [Thrown("org.apache.spark.SparkException", "FAILED_READ_FILE.FILE_NOT_EXIST", "")],  # the condition alone
    [Thrown("org.apache.spark.SparkFileNotFoundException", None, "")],  # Spark's own subclass
    [Thrown("java.nio.file.NoSuchFileException", None, "/w/t/part-0")],
    [Thrown("org.apache.spark.SparkException", "_LEGACY_ERROR_TEMP_2055", "File /w/t/part-0 does not exist")],
    # text only, as Spark Connect or a re-raised message carries it
    [Thrown("SparkConnectGrpcException", None, "[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error ...")],
    [Thrown("Py4JJavaError", None, ": org.apache.spark.SparkException: Job aborted\nCaused by: "
                                   "java.io.FileNotFoundException: File file:/w/t/part-0 does not exist")],
])
def test_a_file_gone_under_the_query_is_a_race(trail: list[Thrown]) -> None:
    assert vanished_file(trail) is not None


@pytest.mark.parametrize("trail", [
    [Thrown("org.apache.spark.SparkException", "FAILED_READ_FILE.NO_HINT", "Encountered error while reading"),
     Thrown("org.apache.parquet.io.ParquetDecodingException", None, "Can not read value at 0")],
    [Thrown("AnalysisException", "TABLE_OR_VIEW_NOT_FOUND", "[TABLE_OR_VIEW_NOT_FOUND] sales.nope")],
    [Thrown("ParseException", "PARSE_SYNTAX_ERROR", "[PARSE_SYNTAX_ERROR] Syntax error at 'SELEC'")],
    [Thrown("ZeroDivisionError", None, "division by zero")],
])
def test_the_querys_own_errors_are_not_races(trail: list[Thrown]) -> None:
    assert vanished_file(trail) is None


def test_the_link_named_is_spark_s_condition_rather_than_a_message_quoting_it() -> None:
    found = vanished_file(SPARK4)
    assert found is not None and found.condition == "FAILED_READ_FILE.FILE_NOT_EXIST"
    quoted = [Thrown("Py4JJavaError", None, "...[FAILED_READ_FILE.FILE_NOT_EXIST]..."), *SPARK4[1:]]
    assert vanished_file(quoted) == SPARK4[1]


def test_the_trail_follows_pythons_chain() -> None:
    try:
        try:
            raise FileNotFoundError("/w/t/part-0")
        except FileNotFoundError as inner:
            raise RuntimeError("the query failed") from inner
    except RuntimeError as exc:
        trail = throwable_trail(exc)
    assert [t.kind for t in trail] == ["RuntimeError", "FileNotFoundError"]
    found = vanished_file(trail)
    assert found is not None and found.kind == "FileNotFoundError"


# --- a lazy result --------------------------------------------------------------------------------


def _lazy(kind: type) -> object:
    return object.__new__(kind)  # the real class, without a JVM behind it: only its type is judged


@dataclass
class _Result:
    rows: list[Row]
    frame: object


@pytest.mark.parametrize(("value", "where"), [
    (_lazy(DataFrame), "result is a pyspark.sql.classic.dataframe.DataFrame"),
    (_lazy(SparkColumn), "result is a pyspark.sql.classic.column.Column"),
    (_lazy(GroupedData), "result is a pyspark.sql.group.GroupedData"),
    (_lazy(RDD), "result is a pyspark.core.rdd.RDD"),
    ((1, _lazy(DataFrame)), "result[1] is a"),
    ({"orders": _lazy(DataFrame)}, "result['orders'] is a"),
    ([[Row(a=1)], {"k": [_lazy(SparkColumn)]}], "result[1]['k'][0] is a"),
    (_Result([Row(a=1)], _lazy(DataFrame)), "result.frame is a"),
    ((r for r in [Row(a=1)]), "result is an iterator (generator)"),
    (map(str, [1]), "result is an iterator (map)"),
], ids=lambda v: v if isinstance(v, str) else type(v).__name__)  # a DataFrame without a JVM has no repr
def test_a_lazy_result_is_found_where_it_is(value: object, where: str) -> None:
    found = lazy_part(value)
    assert found is not None and found.startswith(where), found
    refused = r"bracket: the query returned a lazy result .*\.collect\(\), \.count\(\)"
    with pytest.raises(TypeError, match=refused):
        refuse_lazy(value, "bracket")


@pytest.mark.parametrize("value", [
    [Row(id=1, amount=2), Row(id=2, amount=3)],  # collect()
    3,  # count()
    None,  # a write
    {"orders": 3, "ledger": [Row(id=1)]},
    ("text", b"bytes", 1.5),
    _Result([Row(a=1)], 7),
])
def test_data_is_a_result(value: object) -> None:
    assert lazy_part(value) is None
    refuse_lazy(value, "bracket")


# --- a query whose tables changed -----------------------------------------------------------------


def _table(tmp_path: Path) -> tuple[MemoryCatalog, Path]:
    catalog = MemoryCatalog()
    params = {LAST_ID_PARAM: "40", REPL_SOURCE_PARAM: "src"}
    catalog.create_database(DatabaseSnapshot("sales", parameters=params))
    location = tmp_path / "sales.db" / "items"
    location.mkdir(parents=True)
    (location / "000000_0").write_bytes(b"one")
    catalog.create_table(TableSnapshot("items", "sales", sd=StorageDescriptor(f"file://{location}",
                                                                                [Column("id", "int")])))
    return catalog, location


def test_a_query_is_accepted_only_when_its_tables_stayed_as_pinned(tmp_path: Path) -> None:
    catalog, location = _table(tmp_path)
    pinned = [resolve(catalog, "sales.items")]

    assert _run(catalog, pinned, lambda: 3, "bracket") == _Done(3)

    def overwritten() -> int:  # an apply publishes a new file while the query runs
        staged = location / ".staged"
        staged.write_bytes(b"two, longer")
        os.replace(staged, location / "000000_0")
        return 3

    assert _run(catalog, pinned, overwritten, "bracket") == "['sales.items'] changed while the query ran"


def test_a_vanished_file_is_a_race_and_the_querys_own_error_is_raised(tmp_path: Path) -> None:
    catalog, location = _table(tmp_path)
    pinned = [resolve(catalog, "sales.items")]

    def vanished() -> int:
        raise FileNotFoundError(f"File {location}/000000_0 does not exist")

    outcome = _run(catalog, pinned, vanished, "bracket")
    assert isinstance(outcome, str) and outcome.startswith("a file the query listed was gone when it read it")

    def own_error() -> int:
        raise ZeroDivisionError("division by zero")

    with pytest.raises(ZeroDivisionError):  # the tables are as pinned: the query's own error
        _run(catalog, pinned, own_error, "bracket")

    def failed_while_removed() -> int:
        (location / "000000_0").unlink()
        raise ValueError("Can not read value at 0")

    outcome = _run(catalog, pinned, failed_while_removed, "bracket")
    assert outcome == "the query failed while ['sales.items'] changed (ValueError: Can not read value at 0)"

    with pytest.raises(TypeError, match="lazy result"):
        _run(catalog, [resolve(catalog, "sales.items")], lambda: _lazy(DataFrame), "bracket")


# --- a snapshot is a mapping ------------------------------------------------------------------------


def test_a_snapshot_is_a_read_only_mapping_of_its_tables() -> None:
    orders, ledger = object(), object()
    frames = {"sales.orders": orders, "finance.ledger": ledger}
    tables = {name: PinnedTable(name, None) for name in frames}
    snap = Snapshot(50, frames, tables, {"sales": 50, "finance": 48}, 1)  # type: ignore[arg-type]
    assert isinstance(snap, Mapping)
    assert list(snap) == ["sales.orders", "finance.ledger"] and len(snap) == 2
    assert dict(snap) == {"sales.orders": orders, "finance.ledger": ledger}
    assert list(snap.values()) == [orders, ledger]
    assert "Sales.Orders" in snap and "sales.nope" not in snap
    assert "orders" not in snap and 3 not in snap  # not a db.table name: not a key either
    assert snap.get("sales.nope") is None and snap.get("SALES.ORDERS") is orders
    assert snap == snap and snap != Snapshot(50, frames, tables, {}, 1)  # type: ignore[arg-type]
    assert len({snap}) == 1
