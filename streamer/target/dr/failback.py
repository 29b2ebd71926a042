"""Failback: what the old source changed after the cut, which the new primary never saw.

Those events are listed per object before the old source is rebased as a target of the new primary,
and the rebase is refused until the operator discards them (``--discard-unreplicated``); see
docs/design/dr.md. ``divergence`` is pure; reading the old source's log is the caller's business.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from streamer.errors import StreamerError
from streamer.hive.notification import NotificationRow
from streamer.target.dr.failover import Cut, read_json, write_json

FAILBACK_FILE = "failback.json"


class UnreplicatedChangesError(StreamerError):
    """The old source changed objects after the cut; rebasing it would overwrite those changes."""


@dataclass(frozen=True)
class ObjectChange:
    """Every unreplicated event of one object (a database, or a table of it) on the old source."""

    db: str
    table: str | None
    event_ids: tuple[int, ...]
    event_types: tuple[str, ...]  # distinct, in first-seen order
    published: bool  # some were published to the topic (<= the cut's source head) but not applied

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


def divergence(
    rows: Iterable[NotificationRow], cut: Cut, databases: Collection[str] | None = None
) -> Divergence:
    """Group the old source's events after ``cut.event_id`` by object.

    ``databases`` are the replicated (source) database names; None takes those of the cut. Events
    of other databases, and events that name no database (transaction markers, whose writes are
    logged per table), are not divergence of the replica and are listed apart.
    """
    names = {d.lower() for d in (databases if databases is not None else [d.db for d in cut.databases])}
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
        lines.append(f"  {o.name}: events {ids} ({', '.join(o.event_types)}; {where})")
    return "\n".join(lines)


def record_failback(state_dir: str | Path, div: Divergence, discarded: bool,
                    dropped: Collection[str] | None = None) -> dict[str, Any]:
    """Write ``failback.json``: the divergence found, whether the operator discarded it, and the old
    source's databases ``--rebase`` dropped (None: no rebase)."""
    body = {"time": datetime.now(UTC).isoformat(timespec="seconds"), "discarded": discarded,
            **div.to_json(), "dropped": None if dropped is None else sorted(dropped)}
    write_json(Path(state_dir) / FAILBACK_FILE, body)
    return body


def read_failback(state_dir: str | Path) -> dict[str, Any] | None:
    """``failback.json`` as written by ``record_failback`` (None: no failback accepted yet)."""
    body: dict[str, Any] | None = read_json(Path(state_dir) / FAILBACK_FILE)
    return body


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
