"""A batch's end written while the next one applies (``--batch-follow``).

After each apply the job writes its progress file, publishes the watermark and writes the chain's
anchor (``JobProgress.batch_done``): two fsyncs and a metastore call that the next records of a
follow would otherwise wait for. ``BatchEndWriter`` does that work on a thread of its own, in order;
each end holds the whole state, so a newer one replaces an end not yet started. ``settle`` waits
for the last one (before Spark commits its micro-batch, before a halt is published, at close), and
a failed write is raised there or at the next ``submit``, on the job's thread.

Nothing is promised earlier than before: each write still follows every step of its apply. A crash
loses at most the ends not yet written, as if it came before them: the restart re-reads from Spark's
checkpoint, which is older still, and the applier's markers skip what was applied.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class BatchEndWriter:
    """Runs the newest submitted end on its own thread; ``settle`` waits until it is written."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: Callable[[], None] | None = None
        self._busy = False
        self._error: BaseException | None = None
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, end: Callable[[], None]) -> None:
        """Write ``end`` soon, after the end being written (replacing one that waits); raises the
        error of an earlier end first."""
        with self._cond:
            self._raise_error()
            if self._closed:
                raise RuntimeError("the batch-end writer is closed")
            self._pending = end
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="streamer-batch-end", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def settle(self) -> None:
        """Wait until every submitted end is written; raises the first error of one."""
        with self._cond:
            while self._pending is not None or self._busy:
                self._cond.wait()
            self._raise_error()

    def close(self) -> None:
        """Write what waits, then stop the thread (an error is logged: the job is stopping)."""
        try:
            self.settle()
        except Exception as exc:
            log.warning("the last batch end could not be written: %s", exc)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    return
                end, self._pending, self._busy = self._pending, None, True
            try:
                end()
            except BaseException as exc:  # raised on the job's thread (settle, submit)
                with self._cond:
                    self._error = self._error or exc
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
