"""What ``streamer status`` reports, gathered from the target catalog, target state and the topic.

Lag in events is the source head minus how far a database has been replicated; lag in seconds is
event-time lag: the source time of the head minus the source time of the last applied event (0 when
caught up). A database's own last event is often far behind the head (other databases' events,
transaction markers, a quiet database), so a database that is not halted counts as replicated up to
the newest event the job has consumed: every event of it up to there has been applied.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from streamer.errors import ConfigError
from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM, REPL_SOURCE_PARAM, Catalog
from streamer.target import db_map as names
from streamer.target.state.files import (
    expect_int,
    expect_object,
    expect_opt_int,
    expect_str,
    read_json,
    write_json,
)
from streamer.target.state.lock import state_lock
from streamer.target.state.state_file import TargetState

PROGRESS_FILE = "progress.json"


def write_progress(
    state_dir: str | Path, applied: Mapping[str, tuple[int, int]], consumed_event_id: int = 0
) -> None:
    """Record per database the last applied (event id, source event time) and the newest event id
    the job has consumed; replaced atomically under the state dir's lock (the job is its writer)."""
    body = {
        "databases": {db: {"event_id": i, "event_time": t} for db, (i, t) in sorted(applied.items())},
        "consumed_event_id": consumed_event_id,
    }
    with state_lock(state_dir):
        write_json(Path(state_dir) / PROGRESS_FILE, body)


def read_progress(state_dir: str | Path) -> tuple[dict[str, dict[str, int]], int]:
    """(per database {event_id, event_time}, consumed event id); a file holding only the
    per-database part (an older release's) reads as consumed event id 0. ``StateFileError`` for
    a file of the wrong shape: progress silently read as none would make a replay re-apply."""
    path = Path(state_dir) / PROGRESS_FILE
    raw = read_json(path)
    if raw is None:
        return {}, 0
    body = expect_object(raw, path, "the file")
    consumed = 0
    if "databases" in body:
        consumed = expect_opt_int(body.get("consumed_event_id"), path, "consumed_event_id") or 0
        body = expect_object(body["databases"], path, "'databases'")
    out: dict[str, dict[str, int]] = {}
    for db, entry in body.items():
        item = expect_object(entry, path, f"databases[{db!r}]")
        out[str(db)] = {key: expect_int(item.get(key, 0), path, f"databases[{db!r}].{key}")
                        for key in ("event_id", "event_time")}
    return out, consumed


def replicated_through(
    applied: Mapping[str, int], consumed_event_id: int, stuck: Collection[str]
) -> dict[str, int]:
    """Per database, the event id it is replicated up to: its own last applied id if it is ``stuck``
    (halted, or held events not yet re-applied), else also everything the job consumed."""
    return {db: i if db in stuck else max(i, consumed_event_id) for db, i in applied.items()}


def lag_events(head: int, applied: Mapping[str, int], consumed_event_id: int, stuck: Collection[str]) -> int:
    """Events the furthest-behind database still has to see (0 with nothing replicated)."""
    through = replicated_through(applied, consumed_event_id, stuck)
    return max(0, head - min(through.values())) if through else 0


def source_head(config: Mapping[str, Any], topic: str) -> tuple[int, int] | None:
    """(newest source event id, its source time) from the last record of the topic."""
    from streamer.events.codec import EventDeserializer
    from streamer.events.model import ProgressPayload
    from streamer.kafka.topics import read_tail

    tail = read_tail(config, topic, n=1)
    if not tail or tail[0].value is None:
        return None
    event = EventDeserializer()(tail[0].value)
    if isinstance(event.payload, ProgressPayload):
        return max(event.payload.source_head_event_id, event.event_id), event.source.event_time
    return event.event_id, event.source.event_time


def replicated_sources(catalog: Catalog) -> list[str]:
    """Every source id some database of this target is replicated from (``streamer.source.id``)."""
    found: set[str] = set()
    for name in catalog.list_databases():
        db = catalog.get_database(name)
        owner = None if db is None else db.parameters.get(REPL_SOURCE_PARAM)
        if owner is not None:
            found.add(owner)
    return sorted(found)


def check_source_id(catalog: Catalog, source_id: str) -> None:
    """``ConfigError`` (one line, listing the known ones) when no database is replicated from
    ``source_id``: a typo must not read as an empty status or a verification of nothing."""
    known = replicated_sources(catalog)
    if source_id not in known:
        raise ConfigError(
            f"--source-id {source_id}: no database on this target is replicated from source {source_id!r} "
            f"(sources found: {', '.join(known) or 'none'})"
        )


def status_rows(
    catalog: Catalog, state_dir: str | Path, head: tuple[int, int] | None, source_id: str | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """(one row per database replicated from ``source_id`` (any source when None), every source
    replicated to this target): the databases carry ``streamer.source.id``. Halted databases of the
    state dir without a catalog database are rows too."""
    state = TargetState(state_dir)
    db_map = job_db_map(state_dir)  # the state names source databases; rows name target ones

    def target(name: str) -> str:
        return db_map.get(name.lower(), name)

    halts = {target(db): halt for db, halt in state.halts().items()}
    sources_of = {target(db): db for db in state.halts()}
    by_source, consumed = read_progress(state_dir)
    progress = {target(db): p for db, p in by_source.items()}
    stuck = {target(db) for db in [*state.halts(), *state.pending_replays()]}
    rows: list[dict[str, Any]] = []
    sources: set[str] = set()
    others: set[str] = set()  # databases of other sources
    for name in sorted(catalog.list_databases()):
        db = catalog.get_database(name)
        owner = None if db is None else db.parameters.get(REPL_SOURCE_PARAM)
        if db is None or owner is None:
            continue
        sources.add(owner)
        if source_id is not None and owner != source_id:
            others.add(name)
            continue
        # under --db-map, a database bearing a source name the map sends elsewhere replicates nothing
        replicates = names.source_name(db_map, name)
        if replicates is None:
            continue
        applied = int(db.parameters.get(LAST_ID_PARAM, "0") or 0)
        fence = db.parameters.get(FENCE_PARAM)  # mid-batch out of order: through its marker only
        through = replicated_through({name: applied}, consumed, stuck | ({name} if fence else set()))[name]
        rows.append({**_row(name, applied, through, head, progress.get(name), halts.get(name)),
                     "source_id": owner, "fenced_from_event_id": _event_id(fence),
                     "source_db": replicates})
    for name, halt in halts.items():
        if name not in others and all(r["db"] != name for r in rows):
            applied = state.applied().get(sources_of.get(name, name), 0)
            rows.append({**_row(name, applied, applied, head, progress.get(name), halt), "source_id": None,
                         "fenced_from_event_id": None, "source_db": sources_of.get(name, name)})
    return rows, sorted(sources)


def _event_id(raw: str | None) -> int | None:
    """The fence's event id (-1 for one that is not a number: still a fence)."""
    if raw is None:
        return None
    return int(raw) if raw.strip().isdigit() else -1


def _row(
    db: str,
    applied: int,
    through: int,
    head: tuple[int, int] | None,
    progress: Mapping[str, int] | None,
    halt: Any,
) -> dict[str, Any]:
    behind = max(0, head[0] - through) if head else None
    lag_seconds: float | None = None
    if head is not None:
        if behind == 0:
            lag_seconds = 0.0
        elif progress is not None:
            lag_seconds = float(max(0, head[1] - int(progress.get("event_time", 0))))
    return {
        "db": db,
        "last_applied_event_id": applied,
        "source_head_event_id": head[0] if head else None,
        "replicated_through_event_id": through,
        "lag_events": behind,
        "lag_seconds": lag_seconds,
        "halted": (
            {"event_id": halt.event_id, "event_type": halt.event_type, "object": halt.object,
             "cause": halt.cause, "since": halt.time}
            if halt is not None else None
        ),
    }


MODE_FILE = "job-mode.json"


def write_mode(
    state_dir: str | Path, consistency: str, lanes: int, db_map: Mapping[str, str] | None = None
) -> None:
    """Record the consistency mode the job runs in, for ``streamer status`` (readers must know
    whether prefix consistency holds across databases or per database), and its ``--db-map``: the
    state keys halts and progress by source database, operators and alerts name target ones."""
    body: dict[str, Any] = {"consistency": consistency, "apply_lanes": lanes}
    if db_map:
        body["db_map"] = {k.lower(): v.lower() for k, v in sorted(db_map.items())}
    with state_lock(state_dir):
        write_json(Path(state_dir) / MODE_FILE, body)


def read_mode(state_dir: str | Path) -> dict[str, Any]:
    """The recorded mode; ``global`` for a state dir without one (a job of an older release)."""
    path = Path(state_dir) / MODE_FILE
    raw = read_json(path)
    if raw is None:
        return {"consistency": "global", "apply_lanes": None}
    body = expect_object(raw, path, "the file")
    out: dict[str, Any] = {"consistency": expect_str(body.get("consistency", "global"), path, "consistency"),
           "apply_lanes": expect_opt_int(body.get("apply_lanes"), path, "apply_lanes")}
    if "db_map" in body:
        entries = expect_object(body["db_map"], path, "db_map")
        out["db_map"] = {str(k): expect_str(v, path, f"db_map[{k!r}]") for k, v in entries.items()}
    return out


def job_db_map(state_dir: str | Path) -> dict[str, str]:
    """The ``--db-map`` the job of ``state_dir`` recorded (source -> target database); {} if none."""
    return dict(read_mode(state_dir).get("db_map", {}))


def source_database(state_dir: str | Path, name: str, halted: Collection[str]) -> str:
    """The halted source database an operator means by ``name``: the target database the job maps
    it to (what ``status`` and the alerts show), or its source name. ``ConfigError`` when ``name``
    means two halted databases (``--db-map a:b --db-map b:c``: ``b`` is a's target and a source)."""
    db_map = job_db_map(state_dir)
    lowered = name.lower()
    meant = {src for src, dst in db_map.items() if dst == lowered and src in halted}
    if (lowered in halted and names.target_name(db_map, lowered) == lowered) or lowered in halted:
        meant.add(lowered)
    if len(meant) > 1:
        raise ConfigError(f"--db {name}: names the halted databases {sorted(meant)} (by target and by "
                          "source name); give the other name of the one you mean")
    return meant.pop() if meant else name


def unknown_database(state_dir: str | Path, state: TargetState, db: str) -> str | None:
    """Why ``db`` is no database of this target's state (None: it is one, by its source or target
    name): ``retry`` and ``skip`` of a typo must not answer "not halted"."""
    db_map = job_db_map(state_dir)
    sources = {*read_progress(state_dir)[0], *state.applied(), *state.halts()}
    known = {*sources, *(db_map.get(name, name) for name in sources), *db_map.values()}
    if db.lower() in known:
        return None
    names = ", ".join(sorted(known)[:10]) + (", ..." if len(known) > 10 else "")
    return (f"no database {db!r} in this target's state (--state-dir {state_dir} records "
            f"{names or 'no database yet'}); check the name")


def source_head_from_options(
    bootstrap_servers: str, kafka_setting: tuple[str, ...], topic: str | None, source_id: str
) -> tuple[int, int] | None:
    """The source head the topic announced (``source_head``), from a command's Kafka options."""
    from streamer.kafka.naming import topic_or_default
    from streamer.kafka.settings import config_from_options

    config = config_from_options(bootstrap_servers, kafka_setting)
    return source_head(config, topic_or_default(topic, source_id))
