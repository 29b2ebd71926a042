"""The consistency checker: do samples of a replica only ever show states the source had?

Offline and pure. Input: the source's :class:`~streamer.testing.history.History` and the
:class:`Sample` s concurrent readers took of a target. Output: a :class:`Report` with every
violation (:data:`CHECKS`: phantom, prefix, cut, monotonic, watermark, passed) and the worst staleness,
judged per sample (scope ``global``) or per database (``database``). The sample format and the
checks: docs/design/consistency.md.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from streamer.replay.state import TableState, diff
from streamer.testing import intervals
from streamer.testing.history import History
from streamer.testing.intervals import IdSet

PHANTOM, PREFIX, CUT, MONOTONIC, WATERMARK = "phantom", "prefix", "cut", "monotonic", "watermark"
PASSED = "passed"
CHECKS = (PHANTOM, PREFIX, CUT, MONOTONIC, WATERMARK, PASSED)
EVERYTHING: IdSet = ((-(2**62), 2**62),)
# How many changes of a database's tables may show ahead of its repl.last.id when the target writes
# the marker once per micro-batch (`target run --markers-per-batch`, streamer.target.apply.markers):
# up to one batch of them (the job's default --max-events-per-trigger; pass the job's own when it
# sets another). Without that flag markers follow every step: ``check(batch_events=None)``.
BATCH_EVENTS = 5000


@dataclass(frozen=True)
class Sample:
    """What one reader observed on the target at one instant (see docs/design/consistency.md)."""

    reader: str
    wall_time: float
    applied_event_ids: Mapping[str, int]
    tables: Mapping[str, TableState | None]
    source_head_event_id: int | None = None


@dataclass(frozen=True)
class Violation:
    check: str
    reader: str
    sample: int  # index in the samples given to :func:`check`
    description: str
    obj: str | None = None

    def __str__(self) -> str:
        where = f" {self.obj}" if self.obj else ""
        return f"[{self.check}] reader {self.reader} sample {self.sample}{where}: {self.description}"


@dataclass
class Report:
    samples: int
    violations: list[Violation] = field(default_factory=list)
    worst_staleness_s: float = 0.0
    worst_lag_events: int = 0
    readers: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def by_check(self) -> dict[str, int]:
        return {c: n for c in CHECKS if (n := sum(v.check == c for v in self.violations))}

    def summary(self, limit: int = 10) -> str:
        """A headline, then up to ``limit`` violations of each check (one kind must not hide another)."""
        head = (
            f"{self.samples} samples from {self.readers} readers: {len(self.violations)} violations "
            f"{self.by_check()}; worst lag {self.worst_lag_events} events / {self.worst_staleness_s:.1f} s"
        )
        shown = [str(v) for c in CHECKS for v in [v for v in self.violations if v.check == c][:limit]]
        return "\n".join([head, *shown])


def check(
    history: History,
    samples: Iterable[Sample],
    *,
    max_in_flight: int = 1,
    batch_events: int | None = None,
    scope: str = "global",
    skipped: Mapping[str, Collection[int]] | None = None,
) -> Report:
    """Run every check over ``samples`` (any order; monotonicity follows each reader's wall times);
    ``scope`` is ``global`` or ``database`` (see docs/design/consistency.md). ``skipped`` maps a
    database to the event ids an operator skipped (``streamer target skip``): the only events its
    progress may pass without applying them. A database's tables may be ahead of its
    ``repl.last.id`` by ``max_in_flight`` steps, or by at most ``batch_events`` changes of them (one
    micro-batch whose markers are written at its end); ``batch_events=None``: steps only."""
    if scope not in ("global", "database"):
        raise ValueError(f"scope must be 'global' or 'database', not {scope!r}")
    skips = _skips(history, skipped or {})
    samples = per_database(samples) if scope == "database" else list(samples)
    report = Report(samples=len(samples), readers=len({s.reader for s in samples}))
    cuts: list[IdSet | None] = []
    for index, sample in enumerate(samples):
        per_table = _tables(history, index, sample, report.violations)
        cut = _cut(index, sample, per_table, report.violations)
        _passed(history, index, sample, per_table, skips, report.violations)
        cuts.append(cut)
        if cut is not None:
            _watermark(history, index, sample, per_table, (max_in_flight, batch_events), report.violations)
        _staleness(history, sample, cut, report)
    _monotonic(samples, cuts, report.violations)
    return report


def per_database(samples: Iterable[Sample]) -> list[Sample]:
    """Each sample split into one sample per database (tables ``db.*`` and that database's
    ``repl.last.id``), read by ``reader@db``."""
    out: list[Sample] = []
    for sample in samples:
        dbs = {key.split(".", 1)[0] for key in sample.tables}
        dbs |= {db.lower() for db in sample.applied_event_ids}
        for db in sorted(dbs):
            out.append(replace(
                sample,
                reader=f"{sample.reader}@{db}",
                applied_event_ids={d: i for d, i in sample.applied_event_ids.items() if d.lower() == db},
                tables={k: v for k, v in sample.tables.items() if k.split(".", 1)[0] == db},
            ))
    return out


def _tables(history: History, index: int, sample: Sample, out: list[Violation]) -> dict[str, IdSet]:
    per_table: dict[str, IdSet] = {}
    for key, state in sorted(sample.tables.items()):
        if state is not None and key not in history.changes:
            out.append(_v(PHANTOM, sample, index, "the source never had this table", key))
            per_table[key] = ()
            continue
        if state is not None:
            ever = history.files_ever(key)
            phantoms = sorted((p, f) for p, files in state.partitions for f in files if (p, f) not in ever)
            if phantoms:
                text = f"{len(phantoms)} file(s) no committed source event produced, e.g. {phantoms[:3]}"
                out.append(_v(PHANTOM, sample, index, text, key))
        ids = per_table[key] = history.compatible(key, state)
        if not ids:
            at = max(sample.applied_event_ids.values(), default=history.base_event_id)
            expected = history.state_at(key, at)
            text = (
                f"observed {state.describe() if state else 'absence'} matches no source state; "
                f"vs the source after event {at} (advertised): {diff(state, expected)}"
            )
            out.append(_v(PREFIX, sample, index, text, key))
    return per_table


def _cut(index: int, sample: Sample, per_table: dict[str, IdSet], out: list[Violation]) -> IdSet | None:
    """The event ids compatible with every table of the sample (None when a table fits none)."""
    if any(not ids for ids in per_table.values()):
        return None
    cut: IdSet = EVERYTHING
    seen: list[str] = []
    for key, ids in sorted(per_table.items()):
        narrowed = intervals.intersect(cut, ids)
        if not narrowed:
            out.append(_v(CUT, sample, index, _conflict(per_table, seen, key)))
            return None
        cut = narrowed
        seen.append(key)
    return cut


def _conflict(per_table: dict[str, IdSet], before: list[str], key: str) -> str:
    """Name a pair of tables that no single event id fits, or the table that breaks the others' cut."""
    ids = per_table[key]
    partner = next((k for k in before if not intervals.intersect(per_table[k], ids)), None)
    if partner is not None:
        return (
            f"no single source event id fits all tables: {partner} shows event ids "
            f"{intervals.render(per_table[partner])}, {key} shows {intervals.render(ids)}"
        )
    others = ", ".join(f"{k} {intervals.render(per_table[k])}" for k in before if per_table[k] != EVERYTHING)
    return (
        f"no single source event id fits all tables: {key} shows {intervals.render(ids)}, "
        f"which no id of the others fits ({others})"
    )


def _watermark(
    history: History,
    index: int,
    sample: Sample,
    per_table: dict[str, IdSet],
    bounds: tuple[int, int | None],
    out: list[Violation],
) -> None:
    """``repl.last.id`` never ahead of the tables' state; behind it by at most ``max_in_flight``
    steps or one batch (``batch_events`` changes of the tables shown): see ``check``."""
    max_in_flight, batch_events = bounds
    for db, applied in sorted(sample.applied_event_ids.items()):
        keys = [k for k in per_table if k.startswith(db.lower() + ".")]
        if not keys:
            continue
        ids: IdSet = EVERYTHING
        for key in keys:
            ids = intervals.intersect(ids, per_table[key])
        if intervals.contains(ids, applied):
            continue
        first = intervals.first_at_or_after(ids, applied)
        if first is not None:
            pending = [e for e in history.change_ids(keys) if applied < e <= first]
            steps = {history.step_of(e) for e in pending}
            if len(steps) <= max_in_flight or (batch_events is not None and len(pending) <= batch_events):
                continue
            batch = f" or {batch_events} changes of one batch" if batch_events is not None else ""
            text = (
                f"repl.last.id of {db} is {applied} but its tables show event {first} or later: "
                f"{len(pending)} changes in {len(steps)} steps ahead of the watermark (at most "
                f"{max_in_flight} step{batch} may be in flight)"
            )
        else:
            text = (
                f"repl.last.id of {db} is {applied} but its tables show a state from before it "
                f"(compatible event ids {intervals.render(ids)})"
            )
        out.append(_v(WATERMARK, sample, index, text, db))


def _skips(history: History, skipped: Mapping[str, Collection[int]]) -> dict[str, frozenset[int]]:
    """Skips by lower-case database, each checked to be an event of that database: a skip the
    history does not know would excuse nothing, or the wrong event."""
    out: dict[str, frozenset[int]] = {}
    for db, ids in skipped.items():
        of_db = set(history.events_of(db))
        unknown = sorted(set(ids) - of_db)
        if unknown:
            raise ValueError(f"skipped events {unknown} are not events of database {db} in the history")
        out[db.lower()] = frozenset(ids)
    return out


def _passed(
    history: History,
    index: int,
    sample: Sample,
    per_table: dict[str, IdSet],
    skips: Mapping[str, frozenset[int]],
    out: list[Violation],
) -> None:
    """No event of a database at or below its ``repl.last.id`` is missing from the tables it changed,
    unless an operator skipped it. ``repl.last.id`` held during the whole sample and a step's effect
    shows before the id moves, so a table that fits only states from before one of its database's
    events up to that id lost the event. Changes by other databases' events (a rename across
    databases, a transaction's commit) are the watermark and cut checks' to judge."""
    for db, applied in sorted(sample.applied_event_ids.items()):
        db = db.lower()
        for key, ids in sorted(per_table.items()):
            if not key.startswith(db + ".") or not ids:
                continue
            shown = intervals.last_at_or_before(ids, applied)
            if shown is None or intervals.first_at_or_after(ids, applied) is not None:
                continue  # fits repl.last.id, or a state after it (in flight, or the watermark check's)
            missing = [
                e for e in history.change_ids([key])
                if shown < e <= applied and e not in skips.get(db, ()) and _db_of(history, e) == db
            ]
            if not missing:
                continue
            first = history.event(missing[0])
            kind = f" ({first.event_type})" if first else ""
            text = (
                f"event {missing[0]}{kind} of {db} was passed without being applied: repl.last.id is "
                f"{applied} but {key} shows a state from before it (compatible event ids "
                f"{intervals.render(ids)}), and no operator skipped it"
            )
            if len(missing) > 1:
                text += f"; {len(missing)} such events of {key}: {missing[:5]}"
            out.append(_v(PASSED, sample, index, text, key))


def _db_of(history: History, event_id: int) -> str | None:
    info = history.event(event_id)
    return info.db if info else None


def _staleness(history: History, sample: Sample, cut: IdSet | None, report: Report) -> None:
    """How far behind the source the sample's state is: from the newest source event after which
    the source looked exactly like it (a table untouched since event 10 is not stale at head 500)."""
    head = sample.source_head_event_id
    if head is None:
        head = history.head_at(sample.wall_time)
    position = max(sample.applied_event_ids.values(), default=history.base_event_id)
    if cut:
        latest = intervals.last_at_or_before(cut, head)
        if latest is not None:
            position = max(position, latest)
    if position >= head:
        return
    report.worst_lag_events = max(report.worst_lag_events, head - position)
    first_missing = history.next_event_id(position)
    written = history.event_time(first_missing) if first_missing is not None else None
    if written is not None:
        report.worst_staleness_s = max(report.worst_staleness_s, sample.wall_time - written)


def _monotonic(samples: list[Sample], cuts: list[IdSet | None], out: list[Violation]) -> None:
    by_reader: dict[str, list[int]] = {}
    for index, sample in enumerate(samples):
        by_reader.setdefault(sample.reader, []).append(index)
    for indices in by_reader.values():
        indices.sort(key=lambda i: samples[i].wall_time)
        floor: int | None = None
        floor_sample = -1
        applied: dict[str, tuple[int, int]] = {}
        for i in indices:
            sample = samples[i]
            for db, value in sample.applied_event_ids.items():
                before = applied.get(db)
                if before is not None and value < before[0]:
                    text = f"repl.last.id of {db} went from {before[0]} (sample {before[1]}) back to {value}"
                    out.append(_v(MONOTONIC, sample, i, text, db))
                applied[db] = (value, i)
            cut = cuts[i]
            if not cut:
                continue
            chosen = intervals.first_at_or_after(cut, floor) if floor is not None else cut[0][0]
            if chosen is None:
                text = (
                    f"went back in time: sample {floor_sample} showed event {floor} or later, this one fits "
                    f"only {intervals.render(cut)}"
                )
                out.append(_v(MONOTONIC, sample, i, text))
                chosen = cut[0][0]
            floor, floor_sample = chosen, i


def _v(kind: str, sample: Sample, index: int, text: str, obj: str | None = None) -> Violation:
    return Violation(kind, sample.reader, index, text, obj)
