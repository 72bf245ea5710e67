"""Usefulness: how often injected memories were used, and which ones to look at; what
``memdir stats`` (CLI, ``--json``, MCP, HTTP API, web page) reports for either store.

- **shown**: accesses (``access_count``): every read that returned a memory (injected,
  recalled, found by a search, read with ``get``);
- **injected**: memory-session pairs: a memory shown in full by the session-start context or
  surfaced by recall, once per session, counted once the agent's use of it is known: used,
  or checked over all the session did after it (``recall_surfaced.checked``; a session whose
  transcript could not be read in full, or that no stop hook read, counts nowhere);
- **used**: those of them the agent drew on (:mod:`memdir.capture.uses`), and **ratio** = used /
  injected (None before any injection);
- **most_useful**: the memories used (or reinforced explicitly) most, up to
  :data:`MOST_USEFUL`;
- **never_used**: active memories injected into at least :data:`NEVER_USED_AFTER` sessions and
  never used nor reinforced, most injected first: candidates to archive; at most
  :data:`NEVER_USED_LISTED` of them, and **never_used_count** says how many there are in all
  ("never used: 37 (showing 10)");
- the counts in all and per scope (``by_scope``: a project's own memories apart from the
  user's, which every project of the home injects).

Invariants: both stores build it with :func:`usefulness` from their counts per scope and the
memories that may be listed, so the shape and the rules are one; ``used <= injected``;
``len(never_used) == min(never_used_count, NEVER_USED_LISTED)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["MOST_USEFUL", "NEVER_USED_AFTER", "NEVER_USED_LISTED", "Counts", "MemoryUse",
           "Usefulness", "usefulness"]

#: A memory injected into this many sessions and never used nor reinforced is a candidate
#: to archive.
NEVER_USED_AFTER = 3
MOST_USEFUL = 5  # memories listed as the most useful
NEVER_USED_LISTED = 2 * MOST_USEFUL  # memories listed as never used (all are counted)


@dataclass(frozen=True)
class MemoryUse:
    """One memory's record: how often it was shown (accesses), injected into a session, used
    by the agent, and reinforced explicitly."""

    id: str
    name: str
    type: str
    scope: str
    status: str
    shown: int
    injected: int
    used: int
    reinforced: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "type": self.type, "scope": self.scope,
                "status": self.status, "shown": self.shown, "injected": self.injected,
                "used": self.used, "reinforced": self.reinforced}


@dataclass(frozen=True)
class Counts:
    """Injections, the uses among them, and every access, of a group of memories."""

    shown: int = 0
    injected: int = 0
    used: int = 0

    @property
    def ratio(self) -> float | None:
        return round(self.used / self.injected, 3) if self.injected else None

    def to_dict(self) -> dict[str, Any]:
        return {"shown": self.shown, "injected": self.injected, "used": self.used,
                "ratio": self.ratio}


@dataclass(frozen=True)
class Usefulness:
    """How useful injected memories were, in all and per scope, and the memories to look at:
    the most used, and the active ones injected often and never used."""

    total: Counts = Counts()
    by_scope: tuple[tuple[str, Counts], ...] = ()
    most_useful: tuple[MemoryUse, ...] = ()
    never_used: tuple[MemoryUse, ...] = ()
    #: How many memories are never used in all; ``never_used`` lists the first of them.
    never_used_count: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.total.to_dict(),
                "by_scope": {scope: counts.to_dict() for scope, counts in self.by_scope},
                "most_useful": [m.to_dict() for m in self.most_useful],
                "never_used": [m.to_dict() for m in self.never_used],
                "never_used_count": self.never_used_count,
                "never_used_after": NEVER_USED_AFTER}


def usefulness(by_scope: Iterable[tuple[str, Counts]],
               candidates: Iterable[MemoryUse]) -> Usefulness:
    """The summary from the counts of each scope and the memories that may be listed: at
    least those used or reinforced, and the active ones injected :data:`NEVER_USED_AFTER`
    times or more (a store passes these only, not every memory)."""
    scopes = sorted((scope, Counts(c.shown, c.injected, min(c.used, c.injected)))
                    for scope, c in by_scope)
    # Each use is of a recorded injection, so used <= injected; the cap keeps the ratio a
    # ratio should injections ever be forgotten while the counters stay.
    total = Counts(sum(c.shown for _, c in scopes), sum(c.injected for _, c in scopes),
                   sum(c.used for _, c in scopes))
    items = list(candidates)
    useful = sorted((m for m in items if m.used or m.reinforced),
                    key=lambda m: (-m.used, -m.reinforced, -m.shown, m.id))
    idle = sorted((m for m in items if m.status == "active" and not m.used
                   and not m.reinforced and m.injected >= NEVER_USED_AFTER),
                  key=lambda m: (-m.injected, -m.shown, m.id))
    return Usefulness(total, tuple(scopes), tuple(useful[:MOST_USEFUL]),
                      tuple(idle[:NEVER_USED_LISTED]), len(idle))
