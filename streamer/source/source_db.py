"""Read-only connections to a source's metastore database.

The metastore database belongs to the source's Hive (or to the bundled warehouse's own writer), never
to streamer's readers: every connection opened here refuses writes at the database itself (sqlite
``mode=ro``, PostgreSQL ``default_transaction_read_only``, MySQL/MariaDB read-only session
transactions), so a reader bug or a wrong URL cannot create or change anything there. Errors name the
URL with its password masked and say what to do.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from streamer.errors import ConfigError, StreamerError
from streamer.logs import mask_secrets

CONNECT_TIMEOUT_S = 10


class SourceDatabaseError(ConfigError):
    """The source metastore database URL names nothing a reader can use (missing file, wrong scheme,
    no notification log)."""


class SourceDatabaseUnreachable(StreamerError):
    """The source metastore database did not accept a connection."""


@dataclass(frozen=True)
class Dialect:
    name: str
    quote: str  # identifier quote
    param: str  # placeholder

    def ident(self, name: str) -> str:
        return f"{self.quote}{name}{self.quote}"


SQLITE = Dialect("sqlite", '"', "?")
POSTGRESQL = Dialect("postgresql", '"', "%s")
MYSQL = Dialect("mysql", "`", "%s")


def shown(url: str) -> str:
    """``url`` as errors may quote it: its password masked."""
    return mask_secrets(url)


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def sqlite_path(url: str) -> str:
    """The file a sqlite URL or path names (``sqlite:///rel.db``, ``sqlite:////abs.db``, a plain path)."""
    scheme = scheme_of(url)
    path = url.split("://", 1)[1] if scheme else url
    if scheme == "sqlite" and path.startswith("/"):
        path = path[1:] or ":memory:"
    return path


def connect(url: str) -> tuple[Any, Dialect]:
    """A read-only DB-API connection (autocommit: every read sees the newest committed rows)."""
    scheme = scheme_of(url)
    if scheme in ("", "sqlite", "file"):
        return _sqlite(url), SQLITE
    if scheme in ("postgresql", "postgres"):
        return _postgresql(url), POSTGRESQL
    if scheme in ("mysql", "mariadb", "mysql+pymysql"):
        return _mysql(url), MYSQL
    raise SourceDatabaseError(
        f"notification database URL {shown(url)!r}: unknown scheme {scheme!r}; use a sqlite path or "
        "sqlite:///path, postgresql://user@host:port/db or mysql://user:password@host:port/db"
    )


def _sqlite(url: str) -> Any:
    path = sqlite_path(url)
    if path == ":memory:":
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    file = Path(path)
    if not file.is_file():
        raise SourceDatabaseError(
            f"notification database {shown(url)!r}: no such sqlite file {str(file.resolve())!r}; give the "
            "path of the metastore's existing database (streamer never creates one)"
        )
    return sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                           check_same_thread=False)


def _postgresql(url: str) -> Any:
    import psycopg

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise _unreachable(url, exc) from None
    conn.execute("SET default_transaction_read_only = on")
    return conn


def _mysql(url: str) -> Any:
    import pymysql

    parts = urlsplit(url)
    options = dict(parse_qsl(parts.query))
    try:
        conn = pymysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
            database=parts.path.lstrip("/") or None,
            charset=options.get("charset", "utf8mb4"),
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_S,
        )
    except pymysql.Error as exc:
        raise _unreachable(url, exc) from None
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION READ ONLY")
    return conn


def _unreachable(url: str, exc: Exception) -> SourceDatabaseUnreachable:
    cause = " ".join(str(exc).split()) or type(exc).__name__
    return SourceDatabaseUnreachable(
        f"notification database {shown(url)!r} is unreachable: {mask_secrets(cause)}; check the host, "
        "port, database name and credentials in the URL"
    )


def missing_log(url: str) -> SourceDatabaseError:
    """The error for a database that holds no ``NOTIFICATION_LOG`` table."""
    return SourceDatabaseError(
        f"notification database {shown(url)!r} has no NOTIFICATION_LOG table: it is not a Hive "
        "metastore's database (nor the bundled warehouse's); give the URL of the database the "
        "metastore itself uses (javax.jdo.option.ConnectionURL), or read through --hms-uri"
    )


def is_bundled_warehouse(url: str) -> bool:
    """Whether ``url`` is the bundled warehouse's database (which streamer itself writes), not a Hive
    metastore's: only the warehouse has ``WH_CONFIG``. Asked read-only, so a Hive database is untouched."""
    conn, d = connect(url)
    try:
        cur = conn.cursor()
        try:
            cur.execute(f"SELECT * FROM {d.ident('WH_CONFIG')} WHERE 1 = 0")
            return True
        except Exception:  # each driver has its own "no such table"
            return False
        finally:
            cur.close()
    finally:
        conn.close()
