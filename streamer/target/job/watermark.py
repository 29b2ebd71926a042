"""The published watermark of a target: up to which source event id its replicas are consistent.

Per target database the watermark is "replicated through" (``status.replicated_through``); the
global one is their minimum. It is published as metrics and as the parameters of one watermark
database on the target metastore (``streamer.watermark.*``), once per micro-batch after all its steps,
halts before any later step. What it promises and why: docs/design/consistency.md.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

from streamer import metrics
from streamer.errors import ConfigError, StreamerError
from streamer.events.model import DatabaseSnapshot
from streamer.metastore.catalog import REPL_SOURCE_PARAM, Catalog
from streamer.target.apply.plan import GLOBAL_DB
from streamer.target.state.status import replicated_through

log = logging.getLogger(__name__)

PREFIX = "streamer.watermark."
EVENT_ID_PARAM = PREFIX + "event_id"
DB_PARAM_PREFIX = PREFIX + "db."
HALTED_PARAM = PREFIX + "halted"
SOURCE_PARAM = PREFIX + "source.id"
TIME_PARAM = PREFIX + "time"
CONSISTENCY_PARAM = PREFIX + "consistency"


def default_watermark_db(source_id: str) -> str:
    """``streamer_watermark_<source id>``, with what a Hive database name cannot hold replaced by ``_``."""
    return "streamer_watermark_" + re.sub(r"[^a-z0-9_]", "_", source_id.lower())


@dataclass(frozen=True)
class Watermark:
    """Up to which source event id a target is consistent: globally and per target database."""

    event_id: int
    databases: Mapping[str, int] = field(default_factory=dict)
    halted: frozenset[str] = frozenset()
    source_id: str = ""
    time: float = 0.0
    # the job's --consistency: with "database", lanes of one batch move databases independently, so
    # readers of several databases need them all at the batch's end (streamer.read.decide_marks)
    consistency: str = "global"

    def of(self, db: str) -> int | None:
        """The watermark of target database ``db`` (None when the record does not name it)."""
        return self.databases.get(db.lower())

    def same_ids(self, other: Watermark | None) -> bool:
        """The same ids and halts (source and time of writing aside)."""
        return other is not None and (other.event_id, other.databases, other.halted) == (
            self.event_id, self.databases, self.halted
        )


def compute(
    progress: Mapping[str, int],
    consumed_event_id: int,
    stuck: Collection[str],
    target_db: Callable[[str], str] = str.lower,
    source_id: str = "",
    consistency: str = "global",
) -> Watermark:
    """The watermark after a micro-batch whose steps are all applied (pure).

    ``progress`` maps source databases to their last applied id (the applier's view, including the
    pseudo-database of database-less events, which is left out); ``consumed_event_id`` is the newest
    event id the job consumed; ``stuck`` are source databases halted or holding events to re-apply.
    With no database at all the global watermark is ``consumed_event_id``.
    """
    applied = {db: i for db, i in progress.items() if db != GLOBAL_DB}
    through = replicated_through(applied, consumed_event_id, stuck)
    databases = {target_db(db).lower(): i for db, i in through.items()}
    halted = frozenset(target_db(db).lower() for db in stuck if db in applied)
    return Watermark(min(databases.values(), default=consumed_event_id), databases, halted, source_id,
                     consistency=consistency)


def to_parameters(mark: Watermark) -> dict[str, str]:
    """The database parameters that publish ``mark`` (see docs/design/consistency.md)."""
    params = {
        EVENT_ID_PARAM: str(mark.event_id),
        HALTED_PARAM: ",".join(sorted(mark.halted)),
        SOURCE_PARAM: mark.source_id,
        TIME_PARAM: f"{mark.time:.3f}",
        CONSISTENCY_PARAM: mark.consistency,
    }
    params.update({DB_PARAM_PREFIX + db: str(i) for db, i in sorted(mark.databases.items())})
    return params


def from_parameters(params: Mapping[str, str]) -> Watermark | None:
    """The watermark a database's parameters publish, or None when they hold none.

    Raises ``ValueError`` naming the parameter when a value is not a number (a foreign writer).
    """
    if EVENT_ID_PARAM not in params:
        return None

    def number(key: str) -> int:
        try:
            return int(params[key])
        except ValueError as exc:
            raise ValueError(f"watermark parameter {key}={params[key]!r} is not an event id") from exc

    databases = {k[len(DB_PARAM_PREFIX):]: number(k) for k in params if k.startswith(DB_PARAM_PREFIX)}
    halted = frozenset(d for d in params.get(HALTED_PARAM, "").split(",") if d)
    try:
        written = float(params.get(TIME_PARAM, "0") or 0)
    except ValueError:
        written = 0.0
    return Watermark(number(EVENT_ID_PARAM), databases, halted, params.get(SOURCE_PARAM, ""), written,
                     consistency=params.get(CONSISTENCY_PARAM, "global") or "global")


class WatermarkPublisher:
    """Writes the watermark into its database's parameters and the metrics, once per micro-batch.

    ``name`` None publishes metrics only. The database is created on first use; one that a
    replication stream owns (a replicated database of that name) is refused, never overwritten.
    A failed write is logged and retried with the next batch: readers then see an older watermark,
    which is safe (it only makes them wait).
    """

    def __init__(
        self, catalog: Catalog, name: str | None, location: str, source_id: str,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.catalog = catalog
        self.name = name.lower() if name else None
        self.location = location
        self.source_id = source_id
        self.clock = clock
        self.sleep = sleep
        self.published: Watermark | None = None  # the last record written to the metastore
        self._db: DatabaseSnapshot | None = None
        self._seen_at: float | None = None  # when the database was last seen to exist
        self._labels: set[str] = set()

    def prepare(self) -> None:
        """Check the watermark database at start-up (one metastore call): a replicated database of
        that name is refused with a clear error before any batch runs."""
        if self.name is not None:
            self._db = self._checked(self.catalog.get_database(self.name))

    def _checked(self, current: DatabaseSnapshot | None) -> DatabaseSnapshot | None:
        self._seen_at = self.clock() if current is not None else None
        if current is not None and REPL_SOURCE_PARAM in current.parameters:
            raise ConfigError(
                f"watermark database {self.name!r} is a replicated database (source "
                f"{current.parameters[REPL_SOURCE_PARAM]!r}); choose another --watermark-db"
            )
        return current

    def publish(self, mark: Watermark, *, required: bool = False) -> None:
        """Set the metrics and, when the ids moved, write the record (at most one metastore call
        per batch once the database is known). A ``required`` record (a halt, which readers must
        know before any later step) is tried three times, then raises ``StreamerError``."""
        metrics.TARGET_WATERMARK.set(mark.event_id)
        # a dropped database keeps its place in the record (readers), not a series on /metrics
        labelled = {db: i for db, i in mark.databases.items() if not metrics.is_dropped(db)}
        for db, event_id in labelled.items():
            metrics.TARGET_DB_WATERMARK.labels(db=db).set(event_id)
        for gone in self._labels - set(labelled):
            with contextlib.suppress(KeyError):  # forget_database may have removed it already
                metrics.TARGET_DB_WATERMARK.remove(gone)
        self._labels = set(labelled)
        if self.name is None or mark.same_ids(self.published):
            return
        for attempt in range(3 if required else 1):
            stamped = replace(mark, source_id=self.source_id, time=self.clock())
            try:
                self._write(stamped)
            except ConfigError:
                raise
            except Exception as exc:  # the metastore failed: the next batch writes again
                log.warning("could not publish the watermark to database %s: %s", self.name, exc)
                self._db = None
                metrics.TARGET_WATERMARK_FAILURES.inc()
                if required and attempt == 2:
                    raise StreamerError(
                        f"could not publish halted databases {sorted(mark.halted)} to watermark database "
                        f"{self.name}: {exc}; stopping this batch so that readers never see a database "
                        "move past a halt they do not know of (the batch is applied again on restart)"
                    ) from exc
                if required:
                    self.sleep(1.0)
                continue
            self.published = stamped
            return

    def _write(self, mark: Watermark) -> None:
        assert self.name is not None
        if self._db is None:
            current = self._checked(self.catalog.get_database(self.name))
            if current is None:
                created = DatabaseSnapshot(
                    name=self.name,
                    description=f"streamer: replication watermark of source {self.source_id}",
                    location=self.location,
                    parameters=to_parameters(mark),
                )
                self.catalog.create_database(created)
                self._db, self._seen_at = created, self.clock()
                return
            self._db = current
        kept = {k: v for k, v in self._db.parameters.items() if not k.startswith(PREFIX)}
        desired = replace(self._db, parameters={**kept, **to_parameters(mark)})
        # a metastore may ignore an alter of a missing database (Hive 2.3): it is read again before a
        # write once RECHECK_SECONDS have passed (one call more), so a dropped one is created again
        seen = self._seen_at is not None and self.clock() - self._seen_at < RECHECK_SECONDS
        self.catalog.alter_database(self.name, desired, exists=seen)
        if not seen:
            self._seen_at = self.clock()
        self._db = desired


RECHECK_SECONDS = 30.0
"""How long the watermark database counts as there after it was read, created or altered after a read:
writes within it make one metastore call each."""
