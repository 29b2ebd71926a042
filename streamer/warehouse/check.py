"""A checker of a notification log's basic contract, for tests, demos and benchmarks.

What every consumer relies on: ids start at 1 (or at the cleaner's horizon) and are dense and
increasing, and every stored message decodes with streamer's Hive decoder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from streamer.errors import DecodeError
from streamer.hive.decode import decode_row
from streamer.hive.notification import NotificationRow


@dataclass
class LogReport:
    events: int = 0
    first_event_id: int | None = None
    last_event_id: int | None = None
    by_type: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_log(rows: Iterable[NotificationRow], first_expected: int | None = 1) -> LogReport:
    """Dense increasing ids (from ``first_expected`` unless None) and decodable messages."""
    report = LogReport()
    previous: int | None = None
    for row in rows:
        report.events += 1
        report.by_type[row.event_type] += 1
        if previous is None:
            report.first_event_id = row.event_id
            if first_expected is not None and row.event_id != first_expected:
                report.problems.append(f"first event id is {row.event_id}, expected {first_expected}")
        elif row.event_id != previous + 1:
            report.problems.append(f"event id {row.event_id} follows {previous}: ids are not dense")
        previous = row.event_id
        try:
            event = decode_row(row)
        except DecodeError as exc:
            report.problems.append(f"does not decode: {exc}")
            continue
        if event.event_id != row.event_id or event.event_type.value != row.event_type:
            report.problems.append(f"event {row.event_id} decodes as {event.event_type} {event.event_id}")
    report.last_event_id = previous
    return report
