"""The source's metastore database is read-only to streamer: writes through the readers' connections
fail on sqlite, PostgreSQL and MariaDB; a wrong URL is one clear error that creates nothing."""

import shutil
import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamer.source.reader import SqlNotificationReader
from streamer.source.source_db import SourceDatabaseError, SourceDatabaseUnreachable, connect
from tests.integration.source.test_sql_reader import _open
from tests.unit.source.logdb import LogDb

pytestmark = pytest.mark.integration

SECRET = "Sup3r-S3cret"


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def logdb(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogDb]:
    with _open(request.param, tmp_path, cat_name=True) as db:
        yield db


def _rows(db: LogDb) -> list[tuple[object, ...]]:
    cur = db.conn.cursor()
    cur.execute(f"SELECT {db.quote}EVENT_ID{db.quote} FROM {db.quote}NOTIFICATION_LOG{db.quote}")
    rows = [tuple(r) for r in cur.fetchall()]
    cur.close()
    return rows


def test_writes_and_ddl_through_a_reader_connection_fail(logdb: LogDb) -> None:
    logdb.add(1)
    reader = SqlNotificationReader(logdb.url)
    reader.check()
    assert [r.event_id for r in reader.read_after(0, 10)] == [1]
    reader.close()
    conn, dialect = connect(logdb.url)
    q = dialect.quote
    refused = 0
    for sql in (
        f"INSERT INTO {q}NOTIFICATION_SEQUENCE{q} ({q}NNI_ID{q}, {q}NEXT_EVENT_ID{q}) VALUES (2, 9)",
        f"DELETE FROM {q}NOTIFICATION_LOG{q}",
        f"CREATE TABLE {q}WH_CONFIG{q} ({q}K{q} VARCHAR(10))",
    ):
        cur = conn.cursor()
        try:
            cur.execute(sql)
        except Exception as exc:  # each driver names it its own way: read-only database/transaction
            assert "read" in str(exc).lower() and "only" in str(exc).lower(), exc
            refused += 1
        finally:
            cur.close()
    conn.close()
    assert refused == 3
    assert _rows(logdb) == [(1,)]


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "typo.sqlite"
    reader = SqlNotificationReader(str(missing))
    with pytest.raises(SourceDatabaseError, match="no such sqlite file") as err:
        reader.check()
    assert str(missing) in str(err.value)
    assert not missing.exists()


def test_a_database_without_a_notification_log_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x INTEGER)").connection.close()
    reader = SqlNotificationReader(f"sqlite:///{other}")
    with pytest.raises(SourceDatabaseError, match="no NOTIFICATION_LOG table"):
        reader.check()
    assert sqlite3.connect(other).execute("SELECT name FROM sqlite_master").fetchall() == [("t",)]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("scheme", ["postgresql", "mysql"])
def test_an_unreachable_database_is_one_line_without_the_password(scheme: str) -> None:
    url = f"{scheme}://hive:{SECRET}@127.0.0.1:{_closed_port()}/metastore"
    with pytest.raises(SourceDatabaseUnreachable) as err:
        SqlNotificationReader(url).check()
    text = str(err.value)
    assert SECRET not in text and "***" in text
    assert "\n" not in text and "is unreachable" in text


def test_an_unknown_scheme_masks_the_password() -> None:
    with pytest.raises(SourceDatabaseError) as err:
        connect(f"postgress://hive:{SECRET}@db/metastore")
    assert SECRET not in str(err.value) and "unknown scheme" in str(err.value)


def test_source_run_on_a_missing_sqlite_file_creates_nothing(broker: Any, tmp_path: Path) -> None:
    """The issue's case: a typo'd --notification-db used to be created empty, the topic created, then a
    traceback; now one line, exit 2, no file and no topic."""
    from confluent_kafka.admin import AdminClient

    from streamer.kafka.naming import default_topic

    streamer = shutil.which("streamer", path=str(Path(sys.executable).parent)) or "streamer"
    source_id = f"ro-{uuid.uuid4().hex[:8]}"
    missing = tmp_path / "typo.sqlite"
    done = subprocess.run([streamer, "source", "run", "--source-id", source_id, "--bootstrap-servers",
                           broker.bootstrap_servers, "--notification-db", str(missing), "--once"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output
    assert len([line for line in output.splitlines() if line.startswith("error:")]) == 1, output
    assert not missing.exists()
    topics = AdminClient(broker.client_settings()).list_topics(timeout=10).topics
    assert default_topic(source_id) not in topics


def test_source_run_on_an_unreachable_hms_uri_creates_nothing(broker: Any, tmp_path: Path) -> None:
    """Issue 40 item 6: an unreachable --hms-uri printed a traceback after creating the topic; now
    one line naming the URI, exit 1, and no topic."""
    from confluent_kafka.admin import AdminClient

    from streamer.kafka.naming import default_topic

    streamer = shutil.which("streamer", path=str(Path(sys.executable).parent)) or "streamer"
    source_id = f"ro-{uuid.uuid4().hex[:8]}"
    uri = f"thrift://127.0.0.1:{_closed_port()}"
    done = subprocess.run([streamer, "source", "run", "--source-id", source_id, "--bootstrap-servers",
                           broker.bootstrap_servers, "--hms-uri", uri, "--once"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and uri in errors[0] and "--hms-uri" in errors[0], output
    topics = AdminClient(broker.client_settings()).list_topics(timeout=10).topics
    assert default_topic(source_id) not in topics
