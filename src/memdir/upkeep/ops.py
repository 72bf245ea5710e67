"""The upkeep part of the :class:`~memdir.memdir.Memdir` facade (seeds 002, 004): keeping
memory small, fresh and free of duplicates. A mixin, like :mod:`memdir.capture.ops`, so the
facade stays one object while its code is split by concept; every change goes through the
facade's write path.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memdir.core.model import Scope

if TYPE_CHECKING:
    from memdir.memdir import Memdir
    from memdir.upkeep.consolidate import Plan
    from memdir.upkeep.dream import DreamResult

__all__ = ["Upkeep"]


class Upkeep:
    """Methods of :class:`Memdir`."""

    def _upkeep_md(self) -> Memdir:
        return cast("Memdir", self)

    def consolidate(self, *, dry_run: bool = True, use_llm: bool = True) -> Plan:
        """Plan (and unless ``dry_run``, apply) merges of near-duplicates, archives of weak
        memories, promotions of recurring ones and absolute dates; with an LLM configured,
        merged wording and contradictions too. Nothing is deleted."""
        from memdir.upkeep.consolidate import apply_plan, plan

        md = self._upkeep_md()
        if not dry_run:
            md._sweep_temps()
        md.reconcile()
        at = md._clock()
        planned = plan(md, at, md.llm if use_llm else None)
        return planned if dry_run else apply_plan(md, planned, at)

    def dream(self, *, force: bool = False) -> DreamResult:
        """Orient, gather, consolidate, prune (seed 004). Without ``force`` only when the
        gates pass: 24 h and 5 sessions since the last dream, and the lock is free."""
        from memdir.upkeep.dream import dream, maybe_dream

        md = self._upkeep_md()
        return dream(md) if force else maybe_dream(md)

    def history(self) -> list[dict[str, Any]]:
        """Applied consolidation plans, oldest first (``undone`` marks reversed ones,
        ``interrupted`` those begun and never completed)."""
        from memdir.upkeep.history import history

        return history(self._upkeep_md().home)

    def undo(self) -> dict[str, Any] | None:
        """Reverse the newest consolidation plan not undone yet, an interrupted one too;
        None when there is none."""
        from memdir.upkeep.history import undo_last

        md = self._upkeep_md()
        md._sweep_temps()
        return undo_last(md, md._clock())

    def _sweep_temps(self, *, always: bool = True) -> None:
        """Remove memdir's own temp files left by killed writers (:mod:`memdir.core.temp_files`);
        without ``always``, at most every few minutes (the single writes)."""
        from memdir.core.temp_files import sweep, sweep_due

        md = self._upkeep_md()
        if always or sweep_due(md.home):
            sweep([d.path for d in md._dirs()], md.home)

    def log(self, text: str, *, scope: Scope = "project") -> Path:
        """Append a timestamped bullet to today's log of a scope (KAIROS daily logs);
        consolidation gathers logs into memories."""
        from memdir.upkeep.logs import append_log

        md = self._upkeep_md()
        return append_log(md.directory(scope).path, text, md._clock())
