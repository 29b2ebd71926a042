"""Evidence for DESIGN §2's invariants: an offline consistency checker for replicas (issue 6).

:mod:`~streamer.testing.history` computes the source's table states over event ids,
:mod:`~streamer.testing.state` makes observed and source states comparable, and
:mod:`~streamer.testing.checker` judges samples of a target against them.
"""

from streamer.testing.checker import CHECKS, Report, Sample, Violation, check
from streamer.testing.history import History, SourceStateMachine, file_key, table_key
from streamer.testing.state import FileKey, TableMeta, TableState, observe, table_meta, table_state

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
