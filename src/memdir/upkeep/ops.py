"""The upkeep part of the :class:`~memdir.memdir.Memdir` facade (seeds 002, 004): keeping
memory small, fresh and free of duplicates. Each function takes the facade first, and the
facade's class body binds it as a method, as for :mod:`memdir.capture.ops`; every change goes
through the facade's write path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.core import store
from memdir.core.model import Problem, Scope, Stats

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.upkeep.consolidate import Plan
    from memdir.upkeep.dream import DreamResult

__all__ = ["consolidate", "doctor", "dream", "history", "log", "reindex", "stats", "sweep_temps",
           "undo"]


def consolidate(md: Memdir, *, dry_run: bool = True, use_llm: bool = True) -> Plan:
    """Plan (and unless ``dry_run``, apply) merges of near-duplicates, archives of weak
    memories, promotions of recurring ones and absolute dates; with an LLM configured,
    merged wording and contradictions too. Nothing is deleted."""
    from memdir.upkeep.consolidate import apply_plan, plan

    if not dry_run:
        sweep_temps(md)
    md.reconcile()
    at = md._clock()
    planned = plan(md, at, md.llm if use_llm else None)
    return planned if dry_run else apply_plan(md, planned, at)


def dream(md: Memdir, *, force: bool = False) -> DreamResult:
    """Orient, gather, consolidate, prune (seed 004). Without ``force`` only when the
    gates pass: 24 h and 5 sessions since the last dream, and the lock is free."""
    from memdir.upkeep.dream import dream, maybe_dream

    return dream(md) if force else maybe_dream(md)


def history(md: Memdir) -> list[dict[str, Any]]:
    """Applied consolidation plans, oldest first (``undone`` marks reversed ones,
    ``interrupted`` those begun and never completed)."""
    from memdir.upkeep.history import history

    return history(md.home)


def undo(md: Memdir) -> dict[str, Any] | None:
    """Reverse the newest consolidation plan not undone yet, an interrupted one too;
    None when there is none."""
    from memdir.upkeep.history import undo_last

    sweep_temps(md)
    return undo_last(md, md._clock())


def sweep_temps(md: Memdir, *, always: bool = True) -> None:
    """Remove memdir's own temp files left by killed writers (:mod:`memdir.core.temp_files`);
    without ``always``, at most every few minutes (the single writes)."""
    from memdir.core.temp_files import sweep, sweep_due

    if always or sweep_due(md.home):
        sweep([d.path for d in md._dirs()], md.home)


def log(md: Memdir, text: str, *, scope: Scope = "project") -> Path:
    """Append a timestamped bullet to today's log of a scope (KAIROS daily logs);
    consolidation gathers logs into memories."""
    from memdir.upkeep.logs import append_log

    return append_log(md.directory(scope).path, text, md._clock())


def stats(md: Memdir) -> Stats:
    """Counts by type, scope and status, the strength histogram, usefulness, the last dream
    and today's LLM calls (:mod:`memdir.upkeep.report`)."""
    from memdir.upkeep.report import stats as stats_of

    md._sync()
    return stats_of(md, md._dirs())


def doctor(md: Memdir) -> list[Problem]:
    """What is wrong in the memory directories and the index, each with how to fix it."""
    from memdir.upkeep.report import doctor as problems

    md._sync()
    return problems(md, md._dirs())


def reindex(md: Memdir, progress: Callable[[int, int], None] | None = None, *,
            embeddings: bool = False) -> int:
    """Rebuild the index rows of the directories in play from their files alone (and
    with ``embeddings``, their vectors)."""
    sweep_temps(md)  # memdir's temp files left by killed writers (memdir.core.temp_files)
    count = store.reindex(md.index, md._dirs(), progress)
    md._last_sync = time.monotonic()
    if embeddings:
        md.embed_memories(progress)
    return count
