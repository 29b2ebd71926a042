"""``streamer hive decode``: decode notification-log rows given as JSON lines (an operator's lens).

Each input line is ``{"eventId"?, "eventTime"?, "eventType", "messageFormat", "message", "dbName"?,
"tableName"?, "catName"?}``; each output line is a summary of the decoded event. Undecodable lines
are reported on stderr (line number and cause) and the command exits 1 after printing the rest.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

import click

from streamer.errors import DecodeError
from streamer.events.model import Event, FileRef, PartitionSnapshot, TableSnapshot
from streamer.hive.decode import decode_row
from streamer.hive.notification import NotificationRow


@click.group(name="hive")
def hive() -> None:
    """Decode Hive notification-log rows (operator tools)."""


@hive.command(name="decode")
@click.argument("file", type=click.File("r", encoding="utf-8"), required=False)
def decode(file: IO[str] | None) -> None:
    """Decode JSON-lines notification rows from FILE (or stdin) into one JSON summary per line."""
    failed = False
    for number, line in enumerate(file or sys.stdin, start=1):
        if not line.strip():
            continue
        try:
            event = decode_row(_row(line))
        except DecodeError as exc:
            failed = True
            click.echo(json.dumps({"line": number, **exc.to_dict()}), err=True)
            continue
        click.echo(json.dumps(summarize(event), ensure_ascii=False))
    if failed:
        sys.exit(1)


def _row(line: str) -> NotificationRow:
    try:
        d = json.loads(line)
        if not isinstance(d, dict):
            raise ValueError("a line must be a JSON object")
        return NotificationRow(
            event_id=int(d.get("eventId") or 0),
            event_time=int(d.get("eventTime") or 0),
            event_type=str(d["eventType"]),
            message=d["message"],
            message_format=d.get("messageFormat"),
            db_name=d.get("dbName"),
            table_name=d.get("tableName"),
            cat_name=d.get("catName"),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise DecodeError(f"not a notification row: {exc!r}") from exc


def summarize(event: Event) -> dict[str, Any]:
    """The operator's view of an event: names, snapshots and files, as plain JSON."""
    out: dict[str, Any] = {
        "event_id": event.event_id,
        "event_type": event.event_type.value,
        "db": event.db,
        "table": event.table,
    }
    p: Any = event.payload
    if event.event_type.value == "ALTER_TABLE":
        out["table_snapshot"] = _table(p.after)
        out["table_snapshot_before"] = _table(p.before)
    elif isinstance(getattr(p, "table", None), TableSnapshot):
        out["table_snapshot"] = _table(p.table)
    if hasattr(p, "partitions"):
        out["partitions"] = [_partition(q) for q in p.partitions]
    if hasattr(p, "partition_values") and event.event_type.value == "DROP_PARTITION":
        out["partitions"] = [{"values": v} for v in p.partition_values]
    if event.event_type.value == "ALTER_PARTITION":
        out["partitions"] = [_partition(p.after)]
        out["partitions_before"] = [_partition(p.before)]
    if isinstance(getattr(p, "partition", None), PartitionSnapshot):
        out["partitions"] = [_partition(p.partition)]
    if hasattr(p, "files"):
        out["files"] = [_file(f) for f in p.files]
    if hasattr(p, "replace"):
        out["replace"] = p.replace
    if hasattr(p, "function"):
        f = p.function
        out["function"] = {
            "name": f.name,
            "class_name": f.class_name,
            "resource_uris": [{"type": r.resource_type, "uri": r.uri} for r in f.resource_uris],
        }
    if hasattr(p, "function_name"):
        out["function"] = {"name": p.function_name}
    if hasattr(p, "txn_ids"):
        out["txn_ids"] = p.txn_ids
    if hasattr(p, "txn_id"):
        out["txn_id"] = p.txn_id
    if hasattr(p, "txn_write_ids"):
        out["txn_ids"] = [w.txn_id for w in p.txn_write_ids]
        out["write_ids"] = [w.write_id for w in p.txn_write_ids]
    if hasattr(p, "write"):
        out["write_ids"] = [p.write.write_id]
        out["files"] = [_file(f) for f in p.write.files]
    if hasattr(p, "database") and p.database is not None and not isinstance(p.database, str):
        out["database"] = {"name": p.database.name, "location": p.database.location}
    return out


def _table(t: TableSnapshot | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {
        "name": t.name,
        "db": t.db,
        "location": t.sd.location,
        "table_type": t.table_type,
        "columns": [{"name": c.name, "type": c.type, "comment": c.comment} for c in t.sd.columns],
        "partition_keys": [{"name": c.name, "type": c.type} for c in t.partition_keys],
        "parameters": t.parameters,
        "input_format": t.sd.input_format,
        "output_format": t.sd.output_format,
        "serde": t.sd.serde.serialization_lib,
    }


def _partition(p: PartitionSnapshot) -> dict[str, Any]:
    return {"values": p.values, "location": p.sd.location, "parameters": p.parameters}


def _file(f: FileRef) -> dict[str, Any]:
    return {
        "uri": f.uri,
        "checksum": f.checksum,
        "cm_uri": f.cm_uri,
        "subdir": f.subdir,
        "partition": f.partition,
    }
