"""``streamer warehouse``: create and drive the bundled source warehouse from a shell.

Enough for an operator (and the demo) to set one up, add objects and data, run a workload, and read
its notification log as JSON lines that ``streamer hive decode`` accepts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import click

from streamer.errors import ConfigError
from streamer.events.model import Column
from streamer.hive.notification import NotificationRow
from streamer.warehouse.warehouse import MESSAGE_FORMATS, Warehouse
from streamer.warehouse.workload import Workload, scripted_scenario


@click.group(name="warehouse")
@click.option(
    "--url",
    default=None,
    help="Metastore database (required): a sqlite file path or a postgresql:// URL.",
)
@click.option(
    "--root",
    type=click.Path(path_type=Path),
    help="Warehouse data root (recorded on first use).",
)
@click.option(
    "--cmroot",
    type=click.Path(path_type=Path),
    help="Change-management root (recorded on first use).",
)
@click.option(
    "--message-format",
    type=click.Choice(MESSAGE_FORMATS),
    help="NOTIFICATION_LOG message format (default json-0.2).",
)
@click.pass_context
def warehouse(
    ctx: click.Context, url: str | None, root: Path | None, cmroot: Path | None, message_format: str | None
) -> None:
    """Drive the bundled Hive-compatible source warehouse."""
    ctx.obj = {"url": url, "root": root, "cmroot": cmroot, "message_format": message_format}


@contextmanager
def _opened(ctx: click.Context) -> Iterator[Warehouse]:
    o = ctx.obj
    if not o["url"]:  # checked here, not by click, so that every subcommand's --help works
        raise click.UsageError("Missing option '--url' (or STREAMER_WAREHOUSE_URL).", ctx)
    wh = Warehouse.open(o["url"], o["root"], o["cmroot"], o["message_format"])
    try:
        yield wh
    finally:
        wh.close()


def _columns(specs: tuple[str, ...]) -> list[Column]:
    """``name:type`` items, each option value possibly comma-separated."""
    columns = []
    for item in (s.strip() for spec in specs for s in spec.split(",")):
        name, sep, type_ = item.partition(":")
        if not sep or not name or not type_:
            raise ConfigError(f"column {item!r}: expected name:type, e.g. id:bigint")
        columns.append(Column(name.strip(), type_.strip().lower()))
    return columns


def _pairs(items: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {item!r}: expected key=value")
        out[key] = value
    return out


@warehouse.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the metastore tables (Hive's notification tables included) and record the roots."""
    with _opened(ctx) as wh:
        click.echo(
            json.dumps(
                {
                    "url": wh.store.url if not wh.store.is_postgres else "postgresql",
                    "root": str(wh.root),
                    "cmroot": str(wh.cm.root),
                    "message_format": wh.message_format,
                    "current_event_id": wh.current_event_id(),
                }
            )
        )


@warehouse.command("create-database")
@click.argument("name")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Database parameter.")
@click.option("--description")
@click.pass_context
def create_database(ctx: click.Context, name: str, params: tuple[str, ...], description: str | None) -> None:
    """Create database NAME (a CREATE_DATABASE event)."""
    with _opened(ctx) as wh:
        wh.create_database(name, _pairs(params, "parameter"), description)
        click.echo(f"created database {name.lower()} (event {wh.current_event_id()})")


@warehouse.command("create-table")
@click.argument("db")
@click.argument("name")
@click.option("--column", "columns", multiple=True, required=True, metavar="NAME:TYPE[,...]")
@click.option("--partition-key", "keys", multiple=True, metavar="NAME:TYPE[,...]")
@click.option("--external", is_flag=True, help="An external table (data kept on drop).")
@click.option("--location", type=click.Path(path_type=Path), help="Data directory (default under the db).")
@click.option("--param", "params", multiple=True, metavar="KEY=VALUE", help="Table property.")
@click.pass_context
def create_table(
    ctx: click.Context,
    db: str,
    name: str,
    columns: tuple[str, ...],
    keys: tuple[str, ...],
    external: bool,
    location: Path | None,
    params: tuple[str, ...],
) -> None:
    """Create a Parquet table DB.NAME (a CREATE_TABLE event)."""
    with _opened(ctx) as wh:
        tbl = wh.create_table(
            db,
            name,
            _columns(columns),
            _columns(keys),
            external=external,
            location=location,
            params=_pairs(params, "property"),
        )
        click.echo(f"created {tbl.table_type} {tbl.qualified_name} at {tbl.sd.location}")


@warehouse.command()
@click.argument("db")
@click.argument("table")
@click.option("--rows", "rows_json", help="A JSON list of row objects.")
@click.option(
    "--rows-file", type=click.File("r", encoding="utf-8"), help="File (or - for stdin) with a JSON list."
)
@click.option("--partition", "partition", multiple=True, metavar="KEY=VALUE", help="Target partition.")
@click.option("--overwrite", is_flag=True, help="INSERT OVERWRITE: replace the existing data.")
@click.option("--files", "n_files", default=1, show_default=True, help="Data files to write.")
@click.pass_context
def insert(
    ctx: click.Context,
    db: str,
    table: str,
    rows_json: str | None,
    rows_file: IO[str] | None,
    partition: tuple[str, ...],
    overwrite: bool,
    n_files: int,
) -> None:
    """Insert rows into DB.TABLE (INSERT, or ADD_PARTITION for a new partition)."""
    if (rows_json is None) == (rows_file is None):
        raise click.UsageError("give exactly one of --rows or --rows-file")
    try:
        rows = json.loads(rows_json if rows_json is not None else rows_file.read())  # type: ignore[union-attr]
    except json.JSONDecodeError as exc:
        raise ConfigError(f"rows are not valid JSON: {exc}") from exc
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError("rows must be a JSON list of objects")
    with _opened(ctx) as wh:
        spec = _pairs(partition, "partition") or None
        ids = wh.insert(db, table, rows, spec, overwrite=overwrite, n_files=n_files)
        click.echo(f"inserted {len(rows)} rows into {db}.{table} (events {ids})")


@warehouse.command()
@click.option("--events", "n_events", default=100, show_default=True, help="Write at least this many events.")
@click.option("--seed", default=0, show_default=True, help="Random seed (same seed, same operations).")
@click.option("--scenario", is_flag=True, help="Run the scripted demo scenario instead.")
@click.option("--txn-share", default=0.0, show_default=True, help="Share of operations that are ACID txns.")
@click.option("--abort-ratio", default=0.3, show_default=True, help="Share of those txns that abort.")
@click.pass_context
def workload(
    ctx: click.Context, n_events: int, seed: int, scenario: bool, txn_share: float, abort_ratio: float
) -> None:
    """Drive the warehouse with a random (seeded) mix of DDL and DML, or the demo scenario."""
    with _opened(ctx) as wh:
        if scenario:
            first = wh.current_event_id() + 1
            last = scripted_scenario(wh)
            click.echo(json.dumps({"first_event_id": first, "last_event_id": last}))
            return
        stats = Workload(wh, seed, txn_share=txn_share, abort_ratio=abort_ratio).run(n_events)
        click.echo(
            json.dumps(
                {
                    "first_event_id": stats.first_event_id,
                    "last_event_id": stats.last_event_id,
                    "operations": stats.operations,
                    "txns_committed": stats.txns_committed,
                    "txns_aborted": stats.txns_aborted,
                }
            )
        )


@warehouse.command()
@click.option("--after", default=0, show_default=True, help="Print events with id greater than this.")
@click.option("--limit", type=int, help="At most this many events.")
@click.pass_context
def log(ctx: click.Context, after: int, limit: int | None) -> None:
    """Print NOTIFICATION_LOG rows as JSON lines (input for `streamer hive decode`)."""
    with _opened(ctx) as wh:
        for row in wh.notifications(after, limit):
            sys.stdout.write(json.dumps(row_json(row), ensure_ascii=False) + "\n")


def row_json(row: NotificationRow) -> dict[str, Any]:
    """A stored row as the JSON object ``streamer hive decode`` reads."""
    return {
        "eventId": row.event_id,
        "eventTime": row.event_time,
        "eventType": row.event_type,
        "messageFormat": row.message_format,
        "message": row.message,
        "dbName": row.db_name,
        "tableName": row.table_name,
        "catName": row.cat_name,
    }
