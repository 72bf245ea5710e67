"""Dream (seed 004): background consolidation behind a lock and three gates.

``maybe_dream`` runs after a session ends (the ``session-end`` hook) and checks the gates
cheapest first: at least ``MIN_HOURS`` (24) since the last dream, at least ``MIN_SESSIONS``
(5) sessions indexed since then, and the lock is free. Then the four phases: orient (what is
there), gather (what changed since the last dream), consolidate (the consolidation plan,
applied), prune (the index regenerated).

The lock file ``$MEMDIR_HOME/.consolidate-lock`` holds the holder's PID; its mtime is the
time of the last dream. A lock whose PID is dead, or that is older than ``STALE_SECONDS``
(one hour, against PID reuse), is taken over.

Invariants:
- At most one dream runs per home: checking the lock and writing it happen under an
  advisory lock (``flock``) on a guard file, so no two processes can both find it free.
- A failed dream leaves the previous "last run" time in place, so it is tried again.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.core.temp_files import alive

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.upkeep.consolidate import Plan

__all__ = ["BUDGET_SECONDS", "LOCK_FILE", "MAX_CHANGES", "MIN_HOURS", "MIN_SESSIONS",
           "DreamResult", "dream", "gates", "maybe_dream"]

LOCK_FILE = ".consolidate-lock"
MIN_HOURS = 24.0
MIN_SESSIONS = 5
STALE_SECONDS = 3600.0
# A dream's time budget: planning stops comparing at it (what it found is kept, the rest is
# next time's), and the model is not asked once it has passed; a plan that still overran
# is not applied. It applies at most MAX_CHANGES operations.
BUDGET_SECONDS = 120.0
MAX_CHANGES = 500


@dataclass(frozen=True)
class DreamResult:
    ran: bool
    reason: str  # why it ran or why not
    operations: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"ran": self.ran, "reason": self.reason, "operations": self.operations}


def _lock(home: Path) -> Path:
    return home / LOCK_FILE


def _holder(path: Path) -> int:
    """The pid in the lock file; 0 if none. A bounded read, never through a symlink nor from
    a FIFO: a file planted at the name cannot hang a dream."""
    from memdir.core.errors import UnsafeFileError
    from memdir.core.safe_open import read_head

    try:
        return int(read_head(path, 64)[0].decode("ascii").strip() or "0")
    except (OSError, ValueError, UnsafeFileError):
        return 0


def last_dream(home: Path) -> float:
    """The time of the last dream (the lock's mtime), 0 if never."""
    try:
        return _lock(home).stat().st_mtime
    except OSError:
        return 0.0


def _sessions_since(md: Memdir, since: float) -> int:
    rows = md.index.conn.execute(
        "SELECT DISTINCT session_id, transcript FROM session_chunks").fetchall()
    count = 0
    for _, transcript in rows:
        try:
            if transcript and os.stat(transcript).st_mtime > since:
                count += 1
        except OSError:
            continue
    return count


def gates(md: Memdir, now: float | None = None) -> tuple[bool, str]:
    """Whether a dream is due, cheapest check first, and why (not)."""
    now = time.time() if now is None else now
    last = last_dream(md.home)
    hours = (now - last) / 3600 if last else float("inf")
    if hours < MIN_HOURS:
        return False, f"last dream {hours:.1f} h ago (< {MIN_HOURS:.0f} h)"
    sessions = _sessions_since(md, last)
    if sessions < MIN_SESSIONS:
        return False, f"{sessions} sessions since the last dream (< {MIN_SESSIONS})"
    holder = _holder(_lock(md.home))
    if holder and holder != os.getpid() and alive(holder) and \
            now - last < STALE_SECONDS:
        return False, f"another dream is running (pid {holder})"
    return True, f"{sessions} sessions since the last dream"


def _acquire(home: Path, now: float) -> bool:
    """Take the lock unless a live process took it less than an hour ago. Acquisitions are
    serialised by an advisory lock on a guard file, so the check and the write are one step
    for every process (no two can both find the lock free)."""
    import fcntl

    path = _lock(home)
    home.mkdir(parents=True, exist_ok=True)
    from memdir.core.safe_open import open_append

    # Not through a symlink, never waiting on a FIFO planted at the name (UnsafeFileError).
    with os.fdopen(open_append(home / f"{LOCK_FILE}.guard"), "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # released when the file closes
        holder = _holder(path) if path.exists() else 0
        fresh = now - last_dream(home) < STALE_SECONDS
        if holder and holder != os.getpid() and alive(holder) and fresh:
            return False
        tmp = path.with_name(f"{LOCK_FILE}.{os.getpid()}")
        tmp.write_text(str(os.getpid()))
        os.replace(tmp, path)  # ours now: free, released, dead or stale before
    return True


def dream(md: Memdir) -> DreamResult:
    """Orient, gather, consolidate, prune: now, whatever the gates say (``memdir dream``)."""
    now = time.time()
    previous = last_dream(md.home)
    if not _acquire(md.home, now):
        return DreamResult(False, "another dream holds the lock")
    try:
        from memdir.upkeep.consolidate import apply_plan, plan
        from memdir.upkeep.ops import sweep_temps

        sweep_temps(md)  # what a killed writer left
        md.reconcile()  # orient and gather: the files as they are now
        at = md._clock()
        deadline = time.monotonic() + BUDGET_SECONDS
        planned = plan(md, at, md.llm, deadline=deadline)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the dream's plan took longer than {BUDGET_SECONDS:.0f} s; "
                               "run `memdir consolidate` by hand")
        applied = apply_plan(md, _bounded(planned), at, by="dream")  # consolidate
        md.reconcile()  # prune: MEMORY.md regenerated with what is active now
    except BaseException:
        with contextlib.suppress(OSError):  # failed: released, the previous last-run time
            if previous:
                _lock(md.home).write_text("0")
                os.utime(_lock(md.home), (previous, previous))
            else:
                _lock(md.home).unlink()
        raise
    with contextlib.suppress(OSError):
        _lock(md.home).write_text("0")  # released; the mtime keeps the time of this dream
        os.utime(_lock(md.home), (now, now))
    changed = [op for op in applied.operations if op.op != "conflict"]  # conflicts change nothing
    return DreamResult(True, "dreamt", len(changed))


def _bounded(planned: Plan) -> Plan:
    """At most ``MAX_CHANGES`` changing operations (all conflicts, which change nothing):
    a dream's writes stay within its budget; the rest waits for the next dream."""
    from memdir.upkeep.consolidate import Plan

    kept, changes = [], 0
    for op in planned.operations:
        if op.op != "conflict":
            changes += 1
            if changes > MAX_CHANGES:
                continue
        kept.append(op)
    return Plan(tuple(kept))


def maybe_dream(md: Memdir) -> DreamResult:
    """Dream when the gates pass (the ``session-end`` hook)."""
    due, why = gates(md)
    if not due:
        return DreamResult(False, why)
    return dream(md)
