"""``streamer target run`` in the test's own process, on the suite's shared SparkSession.

A child process costs a fresh Spark JVM (about 10 s on 2 cores) per start; most tests are about
what the job applies, not about the process. :class:`TargetInProcess` takes the same flags as
:class:`~tests.integration.target.helpers.TargetProcess`, parses them with the command's own
parser (``run_cmd.make_context``, so a flag the command refuses is refused here too) and runs
``streamer.target.job.streaming.run`` in a thread until :meth:`stop`. Tests about process death
(SIGKILL), signals or the command line keep the child process.

What differs from the child: ``/metrics`` is this process's registry, so :meth:`metric` counts
what happened since :meth:`start` (gauges start empty, counters from their value then: one job at
a time reads metrics correctly; two jobs of one test share them); the job's log lines
(``streamer.*`` at INFO) go to its log file. What a process does once (a warning said once per
process) a test that checks it resets itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self

from prometheus_client import Gauge

from streamer import metrics
from streamer.filesystems import configure
from streamer.fs_options import fs_settings
from streamer.target.commands import run_cmd, run_settings
from tests.integration.target.helpers import (
    Stream,
    TargetError,
    TargetProcess,
    TargetStack,
    poll_job,
    target_argv,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# samples that accumulate over a process's life: read as the difference since this job started
_ACCUMULATING = ("_total", "_count", "_sum", "_bucket")


class TargetInProcess:
    """A target job in this process (see the module docstring); the interface of ``TargetProcess``."""

    def __init__(
        self, stack: TargetStack, bootstrap: str, source: Stream, *, spark: SparkSession,
        extra: Sequence[str] = (), name: str = "target", roots: tuple[str, str] | None = None,
    ) -> None:
        """``spark``: the suite's session (the job runs on it; asking for it first also keeps the job
        from creating a Hive session other tests would then share)."""
        self.stack = stack
        self.name = name
        self.spark = spark
        self.argv = target_argv(stack, bootstrap, source, metrics_port=0, roots=roots, extra=extra)
        self.log_path = stack.base / f"{name}.log"
        self.starts = 0
        self.result: str | None = None  # why the job stopped (``run``'s answer)
        self.error: BaseException | None = None  # what it failed with
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._baseline: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._handler: logging.Handler | None = None
        self._level = logging.NOTSET

    def start(self) -> Self:
        assert not self.alive, "already running"
        self.stack.base.mkdir(parents=True, exist_ok=True)
        with run_cmd.make_context("run", list(self.argv[2:])) as ctx:  # after "target run"
            settings = run_settings(ctx.params)
            # the command's --fs-option/--hdfs-driver configure this process's filesystems
            configure(fs_settings(ctx.params["fs_option"], ctx.params["hdfs_driver"]))
        _reset_gauges()
        self._baseline = _samples()
        self._attach_log()
        self._stop = threading.Event()
        self.result, self.error = None, None
        self._thread = threading.Thread(target=self._main, args=(settings,), name=f"target-{self.name}",
                                        daemon=True)
        self.starts += 1
        self._thread.start()
        return self

    def _main(self, settings: Any) -> None:
        from streamer.target.job.streaming import run

        log = logging.getLogger("streamer")
        try:
            self.result = run(settings, until=self._stop.is_set)
            log.info("target job %s", self.result)
        except BaseException as exc:
            self.error = exc
            log.error("target job failed: %s: %s", type(exc).__name__, exc)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: float) -> int:
        """Wait for the job to end by itself; its exit code as the command's (0, or 1 on a failure)."""
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TargetError(f"the job did not end within {timeout:.0f} s: {self.tail()}")
        return 0 if self.error is None else 1

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(120)
            if self._thread.is_alive():
                raise TargetError(f"in-process target {self.name} did not stop: {self.tail()}")
        configure(fs_settings((), "auto"))  # as a process that ended leaves them
        self._detach_log()

    def kill(self) -> None:
        raise NotImplementedError("a crash needs a process: use TargetProcess for SIGKILL tests")

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples named ``name`` (matching ``labels``) since :meth:`start`."""
        total = 0.0
        for (sample, sample_labels), value in _samples().items():
            if sample != name or any(dict(sample_labels).get(k) != v for k, v in labels.items()):
                continue
            if sample.endswith(_ACCUMULATING):
                value -= self._baseline.get((sample, sample_labels), 0.0)
            total += value
        return total

    def wait_for(self, cond: Callable[[], bool], what: str, timeout: float = 180.0) -> None:
        """Poll ``cond`` until true; fail early (with the log) when the job ended."""
        poll_job(self, cond, what, timeout, ended=f"{self.error!r} ")

    def _attach_log(self) -> None:
        self._detach_log()
        handler = logging.FileHandler(self.log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.setLevel(logging.INFO)
        logger = logging.getLogger("streamer")
        self._level = logger.level  # restored by _detach_log
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        with open(self.log_path, "a") as out:
            out.write(f"\n==== start {self.starts + 1} (in process)\n")
        logger.addHandler(handler)
        self._handler = handler

    def _detach_log(self) -> None:
        if self._handler is not None:
            logging.getLogger("streamer").removeHandler(self._handler)
            logging.getLogger("streamer").setLevel(self._level)
            self._handler.close()
            self._handler = None


def _samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in metrics.TARGET_REGISTRY.collect():
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _reset_gauges() -> None:
    """A new process starts with its gauges at 0 and no labelled series: so does a new in-process job
    (a data-loss flag, a lag or another database's drift that an earlier test's job left in this
    process must not show as this one's)."""
    for value in vars(metrics).values():
        if isinstance(value, Gauge):
            if getattr(value, "_labelnames", ()):
                value.clear()
            else:
                value.set(0)



TargetJob = TargetProcess | TargetInProcess
"""A test's target job: in this process, or a child process where the test is about the process."""
