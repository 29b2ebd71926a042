"""Tables replicated by state, not by events: their writers log no INSERT.

Spark writes a datasource table (``CREATE TABLE ... USING parquet``: ``spark.sql.sources.provider``
in its parameters) with its own writer, and a Hive Parquet/ORC table too under its defaults
(``spark.sql.hive.convertMetastoreParquet/Orc=true``): the metastore logs no INSERT for either, so
their data would never reach a replica. Such tables are recognised from their parameters (a
datasource provider; a Parquet/ORC Hive table Spark created, ``spark.sql.create.version``) and marked
on the target with their source location (``SOURCE_LOCATION_PARAM``, on the table and its
partitions), so that their directories can be synced (``dir_sync``) when an ALTER of their file
statistics arrives and on the external sync's timer. An ALTER of the statistics alone never marks a
table: Hive's own writes (which log their INSERTs) alter them too, and syncing such a table from the
source's present state would show a replica ahead of its events.
``streamer_target_tables_synced_by_state`` counts them per database and one warning per table says
so. Costs and guarantees: docs/features.md, "Writers".
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping

from streamer import metrics
from streamer.events.model import PartitionSnapshot, TableSnapshot

log = logging.getLogger(__name__)

SOURCE_LOCATION_PARAM = "streamer.source.location"
"""Where the source keeps a table (or partition) replicated by state: what its sync reads."""
PROVIDER_PARAM = "spark.sql.sources.provider"
SPARK_CREATED_PARAM = "spark.sql.create.version"
STATS_PARAMS = ("numFiles", "totalSize", "transient_lastDdlTime")
_CONVERTED_FORMATS = ("parquet", "orc")


def file_format(table: TableSnapshot) -> str | None:
    """``parquet`` or ``orc`` for a Hive table Spark converts to its own writer, else ``None``."""
    text = " ".join(x or "" for x in (table.sd.input_format, table.sd.serde.serialization_lib)).lower()
    return next((f for f in _CONVERTED_FORMATS if f in text), None)


def state_sync_reason(table: TableSnapshot) -> str | None:
    """Why ``table`` (a source snapshot) is replicated by state, or ``None`` when events carry it."""
    if table.table_type != "MANAGED_TABLE" or table.is_transactional:
        return None  # external tables have their own sync; views hold no data; ACID writes log events
    provider = table.parameters.get(PROVIDER_PARAM, "")
    if provider and provider.lower() != "hive":
        return f"a Spark datasource table (USING {provider}), whose writes log no INSERT"
    fmt = file_format(table)
    if fmt is None:
        return None
    setting = f"spark.sql.hive.convertMetastore{fmt.capitalize()}"
    if SPARK_CREATED_PARAM in table.parameters:
        return f"a Hive {fmt} table created by Spark, which writes it logging no INSERT under {setting}=true"
    return None


def stats_changed(before: Mapping[str, str], after: Mapping[str, str]) -> bool:
    """Whether an ALTER changed a table's (or partition's) file statistics."""
    return any(before.get(k) != after.get(k) for k in STATS_PARAMS)


def source_location(table: TableSnapshot | PartitionSnapshot) -> str | None:
    """The source location a target object replicated by state records."""
    return table.parameters.get(SOURCE_LOCATION_PARAM)


def marked(obj: TableSnapshot, location: str | None) -> TableSnapshot:
    """``obj`` (a target snapshot) recording ``location``, its source location, for its syncs."""
    if not location:
        return obj
    return dataclasses.replace(obj, parameters={**obj.parameters, SOURCE_LOCATION_PARAM: location})


def marked_partition(obj: PartitionSnapshot, location: str | None) -> PartitionSnapshot:
    if not location:
        return obj
    return dataclasses.replace(obj, parameters={**obj.parameters, SOURCE_LOCATION_PARAM: location})


class Registry:
    """The tables a job replicates by state: the gauge per database, and one warning per table."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, set[str]] = {}
        self._warned: set[tuple[str, str]] = set()

    def note(self, db: str, table: str, reason: str) -> None:
        with self._lock:
            names = self._tables.setdefault(db, set())
            names.add(table)
            metrics.TARGET_TABLES_SYNCED_BY_STATE.labels(db=db).set(len(names))
            first = (db, table) not in self._warned
            self._warned.add((db, table))
        if first:
            log.warning(
                "%s.%s is %s: its writes reach this target as the source agent's watch records "
                "(source run --watch-seconds, on by default), and it is replicated by state too (its "
                "directories synced when an ALTER of it arrives and every --external-sync-seconds); "
                "a replica of it may show a state the source never had between syncs "
                "(docs/features.md, 'Writers')",
                db, table, reason,
            )

    def forget(self, db: str, table: str) -> None:
        with self._lock:
            names = self._tables.get(db)
            if names is None or table not in names:
                return
            names.discard(table)
            metrics.TARGET_TABLES_SYNCED_BY_STATE.labels(db=db).set(len(names))

    def forget_database(self, db: str) -> None:
        """A dropped database's tables: a database re-created under its name starts from none."""
        with self._lock:
            self._tables.pop(db, None)
            self._warned = {(d, t) for d, t in self._warned if d != db}

    def tables(self, db: str) -> frozenset[str]:
        with self._lock:
            return frozenset(self._tables.get(db, ()))


REGISTRY = Registry()
