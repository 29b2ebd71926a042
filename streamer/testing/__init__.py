"""Evidence for DESIGN §2's invariants: the offline consistency checker, its sampler and campaigns.

Test support only: nothing in ``streamer`` outside this package imports it (tests and bench do).
:mod:`~streamer.testing.history` indexes the source's table states over event ids,
:mod:`~streamer.testing.checker` judges samples of a target against them, and
:mod:`~streamer.testing.sampler` / :mod:`~streamer.testing.campaign` take those samples.
"""

from streamer.replay.machine import SourceStateMachine, file_key, table_key
from streamer.replay.state import FileKey, TableMeta, TableState, observe, table_meta, table_state
from streamer.testing.checker import CHECKS, Report, Sample, Violation, check
from streamer.testing.history import History

__all__ = [
    "CHECKS",
    "FileKey",
    "History",
    "Report",
    "Sample",
    "SourceStateMachine",
    "TableMeta",
    "TableState",
    "Violation",
    "check",
    "file_key",
    "observe",
    "table_key",
    "table_meta",
    "table_state",
]
