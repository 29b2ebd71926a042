"""The SQL reader against real sqlite, PostgreSQL and MariaDB databases (skipped when unreachable)."""

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamer.errors import EventGapError
from streamer.source.gaps import ContiguousReader
from streamer.source.reader import SqlNotificationReader
from tests.unit.source.logdb import LogDb, mysql_logdb, postgres_logdb, sqlite_logdb

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def _open(backend: str, tmp_path: Path, cat_name: bool) -> Iterator[LogDb]:
    if backend == "sqlite":
        with sqlite_logdb(str(tmp_path / "ms.db"), cat_name) as db:
            yield db
        return
    _require_server(backend)
    factory = postgres_logdb if backend == "postgresql" else mysql_logdb
    with factory(cat_name) as db:
        yield db


def _require_server(backend: str) -> None:
    """Skip when the backend's server is not listening (CI has both; laptops may not)."""
    port = 5432 if backend == "postgresql" else 3306
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError as exc:
        pytest.skip(f"{backend} unreachable on 127.0.0.1:{port}: {exc}")


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def logdb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogDb]:
    with _open(request.param, tmp_path, cat_name=True) as db:
        yield db


def test_reads_in_id_order_in_batches(logdb: LogDb) -> None:
    message = '{"db":"sales","table":"t","ünïcode":"✓"}' + "x" * 70000
    written = [logdb.add(i, message=message if i == 2 else "{}") for i in (3, 1, 2, 4, 5)]
    reader = SqlNotificationReader(logdb.url)
    try:
        first = reader.read_after(0, 3)
        assert [r.event_id for r in first] == [1, 2, 3]
        assert first[1] == next(w for w in written if w.event_id == 2)
        assert [r.event_id for r in reader.read_after(3, 3)] == [4, 5]
        assert reader.read_after(5, 3) == []
        assert reader.head_event_id() == 5
    finally:
        reader.close()


def test_sees_rows_committed_after_the_first_read(logdb: LogDb) -> None:
    reader = SqlNotificationReader(logdb.url)
    try:
        assert reader.read_after(0, 10) == [] and reader.head_event_id() == 0
        logdb.add(1)
        assert [r.event_id for r in reader.read_after(0, 10)] == [1]
        assert reader.head_event_id() == 1
    finally:
        reader.close()


def test_txn_writes(logdb: LogDb) -> None:
    logdb.add_write(7, 2, "sales", "b", "file:/w/b/delta_2_2/bucket_0###delta_2_2")
    logdb.add_write(7, 1, "sales", "a", "file:/w/a/f1]file:/w/a/f2", partition="p=1")
    logdb.add_write(8, 1, "sales", "c", "file:/w/c/f")
    reader = SqlNotificationReader(logdb.url)
    try:
        writes = reader.txn_writes(7)
        assert [(w.table, w.write_id, w.partition) for w in writes] == [("a", 1, "p=1"), ("b", 2, "")]
        assert writes[0].files == "file:/w/a/f1]file:/w/a/f2"
        assert reader.txn_writes(9) == []
    finally:
        reader.close()


def test_gap_halts(logdb: LogDb) -> None:
    for i in range(1, 6):
        logdb.add(i)
    logdb.delete(2, 3)
    reader = SqlNotificationReader(logdb.url)
    try:
        guarded = ContiguousReader(reader, settle_seconds=0.01)
        assert [r.event_id for r in guarded.read_after(0, 10)] == [1]
        with pytest.raises(EventGapError, match=r"2\.\.3"):
            guarded.read_after(1, 10)
    finally:
        reader.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mysql"])
def test_hive_2_3_table_without_cat_name(backend: str, tmp_path: Path) -> None:
    with _open(backend, tmp_path, cat_name=False) as logdb:
        logdb.add(1, event_type="OPEN_TXN", db="null", table=" ")
        reader = SqlNotificationReader(logdb.url)
        try:
            (row,) = reader.read_after(0, 10)
            assert (row.cat_name, row.db_name, row.table_name) == (None, "null", " ")
        finally:
            reader.close()
