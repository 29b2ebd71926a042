"""Another process holding a lock: what a running job or a concurrent operator command looks like."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from multiprocessing.process import BaseProcess
from typing import Any


def _hold(hold: Callable[[], AbstractContextManager[Any]], ready: Any, done: Any) -> None:
    with hold():
        ready.set()
        done.wait(30)


@contextmanager
def held_elsewhere(hold: Callable[[], AbstractContextManager[Any]]) -> Iterator[BaseProcess]:
    """A forked process enters ``hold()`` and stays inside until the block ends (then it has let go)."""
    ctx = multiprocessing.get_context("fork")
    ready, done = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(hold, ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        yield holder
    finally:
        done.set()
        holder.join(30)
