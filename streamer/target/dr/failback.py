"""Failback: what the old source changed after the cut, which the new primary never saw.

Those events are listed per object before the old source is rebased as a target of the new primary,
and the rebase is refused until the operator discards them (``--discard-unreplicated``); see
docs/design/dr.md. Before anything is read or changed, the metastore given as the old source is
checked: one whose databases carry this target's failover marks is the new primary (or another target
of the same source) and is refused (``check_old_source``); a failed-over database that the old source
neither holds nor dropped after the cut means the forward job renamed it (``--db-map``) and its changes
cannot be attributed (``check_attribution``). ``divergence`` is pure; reading the old source's log and
databases is the caller's business. ``failback.json`` is a list of records, appended to, never
replaced (a file of an older release holding one record reads as a list of it).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streamer.errors import ConfigError, StreamerError
from streamer.hive.notification import NotificationRow
from streamer.metastore.catalog import (
    FAILOVER_CUT_PARAM,
    FAILOVER_TIME_PARAM,
    REPL_SOURCE_PARAM,
    REPL_TARGET_PARAM,
)
from streamer.target.dr.failover import Cut, FailoverRecord
from streamer.target.state.files import StateFileError, read_json, write_json
from streamer.target.state.lock import state_lock

FAILBACK_FILE = "failback.json"


class UnreplicatedChangesError(StreamerError):
    """The old source changed objects after the cut; rebasing it would overwrite those changes."""


class WrongMetastoreError(StreamerError):
    """The metastore given as the old source carries this target's failover or replica marks: it is
    the new primary (or another target of the same source), not the old source."""


class UnattributedChangesError(StreamerError):
    """Failed-over databases are not on the old source under the names failback looks for (the
    forward job's ``--db-map`` is missing), so the old source's changes cannot be attributed."""


@dataclass(frozen=True)
class ObjectChange:
    """Every unreplicated event of one object (a database, or a table of it) on the old source."""

    db: str
    table: str | None
    event_ids: tuple[int, ...]
    event_types: tuple[str, ...]  # distinct, in first-seen order
    published: bool  # some were published to the topic (<= the cut's source head) but not applied
    target_db: str | None = None  # the failed-over database's name when the forward job renamed it

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}" if self.table else self.db


@dataclass(frozen=True)
class Divergence:
    cut_event_id: int
    old_source_head: int  # newest event id read from the old source's log
    objects: tuple[ObjectChange, ...]
    other_events: tuple[int, ...] = field(default=())  # after the cut, of no replicated database

    @property
    def events(self) -> int:
        return sum(len(o.event_ids) for o in self.objects)

    def to_json(self) -> dict[str, Any]:
        return {
            "cut_event_id": self.cut_event_id,
            "old_source_head": self.old_source_head,
            "unreplicated_events": self.events,
            "objects": [{**asdict(o), "name": o.name} for o in self.objects],
            "other_events": list(self.other_events),
        }


def source_names(cut: Cut, db_map: Mapping[str, str] | None = None) -> dict[str, str]:
    """Per failed-over database of the cut (the target's name), its name on the old source:
    ``db_map`` is the forward target job's ``--db-map`` (source name -> target name)."""
    reverse = {dst.lower(): src.lower() for src, dst in (db_map or {}).items()}
    return {d.db.lower(): reverse.get(d.db.lower(), d.db.lower()) for d in cut.databases}


def divergence(
    rows: Iterable[NotificationRow],
    cut: Cut,
    databases: Collection[str] | None = None,
    db_map: Mapping[str, str] | None = None,
) -> Divergence:
    """Group the old source's events after ``cut.event_id`` by object.

    ``databases`` are the replicated (source) database names; None takes those of the cut, mapped
    back to the old source's names through ``db_map`` (the forward job's ``--db-map``). Events
    of other databases, and events that name no database (transaction markers, whose writes are
    logged per table), are not divergence of the replica and are listed apart.
    """
    targets = {src.lower(): dst.lower() for src, dst in (db_map or {}).items()}
    names = {d.lower() for d in (databases if databases is not None else source_names(cut, db_map).values())}
    head = cut.source_head_event_id
    by_object: dict[tuple[str, str | None], list[NotificationRow]] = {}
    other: list[int] = []
    newest = cut.event_id
    for row in sorted(rows, key=lambda r: r.event_id):
        newest = max(newest, row.event_id)
        if row.event_id <= cut.event_id:
            continue
        db = _name(row.db_name)
        if db is None or db not in names:
            other.append(row.event_id)
            continue
        by_object.setdefault((db, _name(row.table_name)), []).append(row)
    objects = tuple(
        ObjectChange(
            db,
            table,
            tuple(r.event_id for r in found),
            tuple(dict.fromkeys(r.event_type for r in found)),
            head is not None and any(r.event_id <= head for r in found),
            targets[db] if targets.get(db, db) != db else None,
        )
        for (db, table), found in sorted(by_object.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))
    )
    return Divergence(cut.event_id, newest, objects, tuple(other))


def describe(div: Divergence) -> str:
    """Human lines, one per object."""
    if not div.objects:
        return f"no changes on the old source after the cut (event {div.cut_event_id})"
    lines = [f"{div.events} event(s) on the old source after the cut (event {div.cut_event_id}) "
             f"were never applied to the new primary:"]
    for o in div.objects:
        ids = _ranges(o.event_ids)
        where = "published, not applied" if o.published else "never published"
        renamed = ""
        if o.target_db is not None:
            renamed = f" ({o.target_db}.{o.table} on the new primary)" if o.table else \
                f" ({o.target_db} on the new primary)"
        lines.append(f"  {o.name}{renamed}: events {ids} ({', '.join(o.event_types)}; {where})")
    return "\n".join(lines)


def check_old_source(databases: Mapping[str, Mapping[str, str]], record: FailoverRecord,
                     db_map: Mapping[str, str] | None = None) -> None:
    """Raise ``WrongMetastoreError`` when the metastore given as the old source is not it.

    ``databases``: that metastore's databases (lower-case name -> parameters), at least those failback
    would read or drop (the cut's names and their old-source names). A database there that carries
    this target's failover marks (``repl.failover.cut`` with this failover's time, or the source id
    the failed-over databases were replicated from) is the new primary's; one that is a replica of
    that source (``repl.target.for``, ``streamer.source.id``) is another target of it. The old
    source's own databases carry neither (a replica never takes a stream's bookkeeping from its
    source), though they may carry other streams' (a chained source, an earlier failover the other
    way), which are not refused.
    """
    assert record.cut is not None
    mapped = source_names(record.cut, db_map)
    problems: list[str] = []
    for name in sorted(set(mapped) | set(mapped.values())):
        params = databases.get(name)
        if params is None:
            continue
        owner = params.get(REPL_SOURCE_PARAM)
        ours = owner is not None and owner in record.source_ids
        cut_mark = params.get(FAILOVER_CUT_PARAM)
        when = params.get(FAILOVER_TIME_PARAM)
        if cut_mark is not None and (ours or when == record.started):
            problems.append(
                f"database {name!r} carries {FAILOVER_CUT_PARAM}={cut_mark} ({FAILOVER_TIME_PARAM}={when}, "
                f"{REPL_SOURCE_PARAM}={owner}), written by this target's failover: this is the new "
                "primary's metastore")
        elif ours:
            marks = f"{REPL_SOURCE_PARAM}={owner}"
            if params.get(REPL_TARGET_PARAM) is not None:
                marks = f"{REPL_TARGET_PARAM}={params[REPL_TARGET_PARAM]}, {marks}"
            problems.append(
                f"database {name!r} carries {marks}: it is a replica of the failed-over source (another "
                "target of it), not the source itself")
    if problems:
        raise WrongMetastoreError(
            "refusing to fail back onto this metastore, it is not the old source:\n  "
            + "\n  ".join(problems)
            + "\nthis is the new primary's metastore (or a replica of the same source); give the old "
            "source's metastore as --source-hms-uri or --notification-db. Nothing was changed.")


def check_attribution(existing: Collection[str], cut: Cut, rows: Iterable[NotificationRow],
                      db_map: Mapping[str, str] | None = None) -> None:
    """Raise ``UnattributedChangesError`` when a failed-over database is neither on the old source
    (``existing``: its database names) under its old-source name nor dropped there after the cut.

    The cut names the target's databases; with a forward ``--db-map`` the old source holds them under
    other names, and without that map its changes after the cut would be nobody's (listed as other
    events, the rebase dropping nothing): failback must be given the same map.
    """
    have = {n.lower() for n in existing}
    after = [r for r in rows if r.event_id > cut.event_id]
    dropped = {_name(r.db_name) for r in after if r.event_type.upper() == "DROP_DATABASE"}
    missing = {t: s for t, s in source_names(cut, db_map).items() if s not in have and s not in dropped}
    if not missing:
        return
    named = sorted({db for r in after if (db := _name(r.db_name)) is not None})
    gone = ", ".join(f"{t!r}" + (f" (as {s!r})" if s != t else "") for t, s in sorted(missing.items()))
    raise UnattributedChangesError(
        f"the failed-over database(s) {gone} are not on the old source, and its log after the cut "
        f"(event {cut.event_id}) does not drop them, so its changes cannot be attributed to them "
        f"(databases its events after the cut name: {', '.join(named) or 'none'}). If the forward "
        "target job ran with --db-map SRC:DST, give failback the same --db-map (the failover does not "
        "record it); otherwise check that this is the old source's metastore. Nothing was changed.")


def parse_db_map(values: Iterable[str]) -> dict[str, str]:
    """``--db-map SRC:DST`` values (as given to ``streamer target run``), lower case."""
    out: dict[str, str] = {}
    for item in values:
        src, found, dst = item.partition(":")
        if not found or not src.strip() or not dst.strip():
            raise ConfigError(f"--db-map: expected SRC:DST, got {item!r}")
        out[src.strip().lower()] = dst.strip().lower()
    return out


def record_failback(state_dir: str | Path, div: Divergence, discarded: bool,
                    dropped: Collection[str] | None = None, db_map: Mapping[str, str] | None = None,
                    old_source: str | None = None) -> dict[str, Any]:
    """Append a record to ``failback.json`` (earlier records stay): the divergence found, whether the
    operator discarded it, the old source's databases ``--rebase`` dropped (None: no rebase), the
    ``--db-map`` the old source's names were mapped with and the metastore checked."""
    body = {"time": datetime.now(UTC).isoformat(timespec="seconds"), "discarded": discarded,
            **div.to_json(), "dropped": None if dropped is None else sorted(dropped),
            "db_map": dict(sorted((db_map or {}).items())), "old_source": old_source}
    with state_lock(state_dir):  # append to what is there now, not to what was read before
        write_json(Path(state_dir) / FAILBACK_FILE, [*read_failbacks(state_dir), body])
    return body


def read_failbacks(state_dir: str | Path) -> list[dict[str, Any]]:
    """Every record of ``failback.json``, oldest first (empty: no failback accepted yet); a file of
    an older release holds one record, not a list."""
    path = Path(state_dir) / FAILBACK_FILE
    body = read_json(path)
    if body is None:
        return []
    records = [body] if isinstance(body, dict) else body
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise StateFileError(f"state file {path} is malformed: expected a list of records (JSON objects)")
    return records


def read_failback(state_dir: str | Path) -> dict[str, Any] | None:
    """The newest record of ``failback.json`` (None: no failback accepted yet)."""
    records = read_failbacks(state_dir)
    return records[-1] if records else None


def rebased(records: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The record of the rebase (``dropped`` set), whichever record it is; None: never rebased."""
    return next((r for r in records if r.get("dropped") is not None), None)


def catalog_databases(catalog: Any, names: Collection[str]) -> dict[str, dict[str, str]]:
    """Every database of a metastore (``catalog``: ``list_databases``/``get_database``, as a
    ``Catalog``): lower-case name -> parameters, read for ``names`` only ({} for the others)."""
    wanted = {n.lower() for n in names}
    out: dict[str, dict[str, str]] = {}
    for name in catalog.list_databases():
        params: dict[str, str] = {}
        if name.lower() in wanted:
            db = catalog.get_database(name)
            if db is None:
                continue  # dropped meanwhile
            params = dict(db.parameters)
        out[name.lower()] = params
    return out


def sql_databases(url: str) -> dict[str, dict[str, str]] | None:
    """The databases of a metastore database (as ``--notification-db``): lower-case name ->
    parameters, from Hive's ``DBS``/``DATABASE_PARAMS`` or the bundled warehouse's ``WH_DATABASES``;
    None when it holds neither."""
    import json

    from streamer.source.reader import connect

    conn, d = connect(url)
    hive = (f"SELECT d.{d.ident('NAME')}, p.{d.ident('PARAM_KEY')}, p.{d.ident('PARAM_VALUE')} "
            f"FROM {d.ident('DBS')} d LEFT JOIN {d.ident('DATABASE_PARAMS')} p "
            f"ON p.{d.ident('DB_ID')} = d.{d.ident('DB_ID')}")
    warehouse = f"SELECT {d.ident('NAME')}, {d.ident('SNAPSHOT')} FROM {d.ident('WH_DATABASES')}"
    try:
        rows = _query(conn, hive)
        if rows is not None:
            out: dict[str, dict[str, str]] = {}
            for name, key, value in rows:
                params = out.setdefault(str(name).lower(), {})
                if key is not None:
                    params[str(key)] = "" if value is None else str(value)
            return out
        rows = _query(conn, warehouse)
        if rows is not None:
            return {str(name).lower(): {str(k): str(v) for k, v in
                                        (json.loads(snapshot).get("parameters") or {}).items()}
                    for name, snapshot in rows}
        return None
    finally:
        conn.close()


def _query(conn: Any, sql: str) -> list[tuple[Any, ...]] | None:
    """Rows of ``sql``; None when it fails (a table this kind of metastore database does not have)."""
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return list(cur.fetchall())
    except Exception:  # the driver's "no such table" differs per backend
        return None
    finally:
        cur.close()


def drop_old_databases(client: Any, names: Iterable[str]) -> list[str]:
    """Drop ``names`` on the old source's metastore (``client``: a Thrift client), with their tables
    and the data of their managed tables, so the new primary's bootstrap rebuilds them from nothing;
    returns those that existed. External tables' files stay (as Hive's DROP DATABASE CASCADE)."""
    existing = {d.lower() for d in client.get_all_databases()}
    dropped: list[str] = []
    for name in sorted({n.lower() for n in names}):
        if name not in existing:
            continue
        client.drop_database(name, True, True)  # deleteData, cascade
        dropped.append(name)
    return dropped


def _name(value: str | None) -> str | None:
    if value is None or not value.strip() or value == "null":
        return None
    return value.lower()


def _ranges(ids: Iterable[int]) -> str:
    """``3-5,9`` from ``3,4,5,9``."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(ids):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)
