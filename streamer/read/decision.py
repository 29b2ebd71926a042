"""The retry decision of a consistent read (pure): marks read before and after, tables resolved twice."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from streamer.metastore.catalog import FENCE_PARAM, LAST_ID_PARAM
from streamer.read.model import DbMark, Marks, PinnedTable
from streamer.target.job.watermark import Watermark


class Verdict(enum.Enum):
    READ = "read"  # a consistent cut: read (or accept) it
    RETRY = "retry"  # an apply raced the read: read again at once
    WAIT = "wait"  # not there yet (watermark below min_event_id, or not published): wait, read again
    FAIL = "fail"  # no waiting helps (a halted database below min_event_id, mixed watermarks)
    MISSING = "missing"  # no database read exists on the target and nothing asked to wait for one


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""
    event_id: int | None = None


def decide_marks(marks: Marks, dbs: Sequence[str], min_event_id: int | None = None) -> Decision:
    """Whether marks read before and after a read of tables of ``dbs`` allow it, and the event id
    it shows at least: the databases' watermark, or a newer ``repl.last.id`` among them (mid-batch,
    every step up to that id is applied, in order, across databases). A database carrying the apply
    fence is being applied out of order: no id says what it shows."""
    mark = marks.watermark
    if mark is None:
        if not any(m.exists for m in marks.databases.values()):
            text = f"none of the databases {sorted(dbs)} exists on the target"
            if min_event_id is None:  # nothing to wait for: a wrong name, or a database not replicated
                return Decision(Verdict.MISSING, text)
            return Decision(Verdict.WAIT, f"{text} yet")
        return Decision(
            Verdict.WAIT, "no watermark is published yet (is the target job running, with a --watermark-db?)"
        )
    present: dict[str, int] = {}
    for db in dbs:
        seen = marks.databases.get(db, DbMark(False))
        if not seen.exists:
            continue  # its tables are absent: true at any event id after the database's drop
        if seen.last_id is None or seen.source_id is None:
            return Decision(Verdict.FAIL, f"database {db} is not a replica (it has no {LAST_ID_PARAM})")
        if mark.source_id and seen.source_id != mark.source_id:
            text = f"database {db} is replicated from source {seen.source_id!r}, not {mark.source_id!r}"
            return Decision(Verdict.FAIL, text)
        present[db] = seen.last_id
    fenced = _fenced(marks, present, mark)
    if fenced is not None:
        return fenced
    halted = sorted(db for db in present if db in mark.halted)
    if halted:
        db = halted[0]
        known = mark.of(db)
        pinned = present[db] if known is None else known
        if len(present) > 1:
            others = ", ".join(sorted(set(present) - {db}))
            text = (
                f"database {db} is halted at event {pinned} while {others} went on: no single source state "
                "covers them; read the halted database on its own"
            )
            return Decision(Verdict.FAIL, text)
        if present[db] > pinned:
            return Decision(Verdict.RETRY, f"database {db} is being re-applied after its halt at {pinned}")
        event_id = pinned
    else:
        # no read database is halted: every step up to the global watermark (a batch's end) and up
        # to each read database's watermark and repl.last.id is applied, steps being in order
        marked = [w for db in present if (w := mark.of(db)) is not None]
        if mark.consistency == "database" and len(present) > 1:
            # lanes move databases independently within a batch: only at a batch's end (every read
            # database at or below its watermark, so no step of the running batch touched it) do
            # several databases show one source state
            ahead = sorted(db for db, i in present.items() if i > _db_mark(mark, db))
            if ahead:
                text = (f"--consistency database: {', '.join(ahead)} moved past the watermark in the batch "
                        "being applied; waiting for the batch's end")
                return Decision(Verdict.RETRY, text)
            event_id = max([mark.event_id, *marked])
        else:
            event_id = max([mark.event_id, *marked, *present.values()])
    if min_event_id is not None and event_id < min_event_id:
        if halted:
            text = f"database {halted[0]} is halted at event {event_id}, below min_event_id {min_event_id}"
            return Decision(Verdict.FAIL, text, event_id)
        where = ", ".join(f"{db} repl.last.id {i} watermark {mark.of(db)}" for db, i in present.items())
        text = f"waiting for event {min_event_id}: the tables reflect event {event_id}"
        return Decision(Verdict.WAIT, f"{text} ({where})" if where else text, event_id)
    return Decision(Verdict.READ, event_id=event_id)


def _fenced(marks: Marks, present: Iterable[str], mark: Watermark) -> Decision | None:
    """RETRY while a read database carries the apply fence (a batch applies it grouped per table, out
    of event-id order: its tables may show a state the source never had, at any repl.last.id); FAIL
    when it is halted too, since the fence then stays until the database's next batch ends."""
    fences = {db: fence for db in present if (fence := marks.databases[db].fence) is not None}
    for db in sorted(fences, key=lambda name: (name not in mark.halted, name)):
        batch = f"batch from event {fences[db]}"
        if db in mark.halted:
            text = (f"database {db} halted while being applied out of order ({batch}; {FENCE_PARAM} is "
                    "set): its tables may show a state the source never had; retry the halted database "
                    "(streamer target retry) so its next batch finishes and clears the fence")
            return Decision(Verdict.FAIL, text)
        return Decision(Verdict.RETRY, f"database {db} is being applied out of order ({batch}): read again")
    return None


def _db_mark(mark: Watermark, db: str) -> int:
    own = mark.of(db)
    return mark.event_id if own is None else own


def decide(
    before: Marks,
    after: Marks,
    first: Sequence[PinnedTable],
    second: Sequence[PinnedTable],
    dbs: Sequence[str],
    min_event_id: int | None = None,
) -> Decision:
    """The verdict on one attempt: marks read before and after, tables resolved twice in between."""
    if before != after:
        return Decision(Verdict.RETRY, "the watermark or a repl.last.id moved during the read")
    if list(first) != list(second):
        changed = [a.name for a, b in zip(first, second, strict=True) if a != b]
        return Decision(Verdict.RETRY, f"tables changed between two resolutions: {changed}")
    return decide_marks(before, dbs, min_event_id)

