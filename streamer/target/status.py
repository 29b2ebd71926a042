"""What ``streamer status`` reports, gathered from the target catalog, target state and the topic.

Lag in events is the source head minus the applied id; lag in seconds is event-time lag: the source
time of the head minus the source time of the last applied event (0 when caught up).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamer.target.catalog import LAST_ID_PARAM, REPL_SOURCE_PARAM
from streamer.target.state import TargetState

PROGRESS_FILE = "progress.json"


def write_progress(state_dir: str | Path, applied: Mapping[str, tuple[int, int]]) -> None:
    """Record per database the last applied (event id, source event time); replaced atomically."""
    path = Path(state_dir) / PROGRESS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    body = {db: {"event_id": i, "event_time": t} for db, (i, t) in sorted(applied.items())}
    tmp.write_text(json.dumps(body), encoding="utf-8")
    tmp.replace(path)


def read_progress(state_dir: str | Path) -> dict[str, dict[str, int]]:
    try:
        data = json.loads((Path(state_dir) / PROGRESS_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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


def collect_status(
    hms_uri: str, state_dir: str | Path, head: tuple[int, int] | None, now: float
) -> list[dict[str, Any]]:
    from streamer.target.hms_catalog import HmsCatalog

    state = TargetState(state_dir)
    halts = state.halts()
    progress = read_progress(state_dir)
    catalog = HmsCatalog(hms_uri)
    rows: list[dict[str, Any]] = []
    try:
        for name in sorted(catalog.list_databases()):
            db = catalog.get_database(name)
            if db is None or REPL_SOURCE_PARAM not in db.parameters:
                continue
            applied = int(db.parameters.get(LAST_ID_PARAM, "0") or 0)
            rows.append(_row(name, applied, head, progress.get(name), halts.get(name)))
        for name, halt in halts.items():
            if all(r["db"] != name for r in rows):
                rows.append(_row(name, state.applied().get(name, 0), head, progress.get(name), halt))
    finally:
        catalog.close()
    return rows


def _row(
    db: str, applied: int, head: tuple[int, int] | None, progress: Mapping[str, int] | None, halt: Any
) -> dict[str, Any]:
    lag_events = max(0, head[0] - applied) if head else None
    lag_seconds: float | None = None
    if head is not None:
        if lag_events == 0:
            lag_seconds = 0.0
        elif progress is not None:
            lag_seconds = float(max(0, head[1] - int(progress.get("event_time", 0))))
    return {
        "db": db,
        "last_applied_event_id": applied,
        "source_head_event_id": head[0] if head else None,
        "lag_events": lag_events,
        "lag_seconds": lag_seconds,
        "halted": (
            {"event_id": halt.event_id, "event_type": halt.event_type, "object": halt.object,
             "cause": halt.cause, "since": halt.time}
            if halt is not None else None
        ),
    }
