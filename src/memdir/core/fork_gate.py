"""A gate between short background work and ``fork()``: no process is forked while a thread of
memdir's is inside SQLite or the model, so no child inherits one of their locks held (it
would hang on its first ``sqlite3.connect``).

Threads that run such work briefly (recall prefetch, a hybrid search's query embedding) enter
:func:`working`; ``os.register_at_fork`` makes a fork wait until none is inside and lets no
new one in until it is done. The long-running vector worker has its own gate
(:mod:`memdir.retrieval.vector_worker`), which lets a fork through between two batches.

Invariants: a thread inside :func:`working` must not fork itself (it would wait for itself);
a fork's child starts with a fresh, open gate; a fork that never comes (an exception in a
fork handler) cannot happen here, the handlers only wait and flag.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["working"]


class _Gate:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.busy = 0
        self.forking = False


_gate = _Gate()


@contextlib.contextmanager
def working() -> Iterator[None]:
    """Around a background thread's SQLite or model work: no fork happens meanwhile."""
    gate = _gate
    with gate.cond:
        while gate.forking:
            gate.cond.wait()
        gate.busy += 1
    try:
        yield
    finally:
        with gate.cond:
            gate.busy -= 1
            gate.cond.notify_all()


def _before_fork() -> None:
    gate = _gate
    with gate.cond:
        gate.forking = True
        while gate.busy:
            gate.cond.wait()


def _after_fork_in_parent() -> None:
    gate = _gate
    with gate.cond:
        gate.forking = False
        gate.cond.notify_all()


def _after_fork_in_child() -> None:
    global _gate
    _gate = _Gate()  # the parent's threads do not exist here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
