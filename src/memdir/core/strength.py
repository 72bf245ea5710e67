"""Strength (seed 002): how much a memory deserves a place in the agent's context, in [0, 1].

    strength = type weight × relevance × decay × boost

- **type weight** (the taxonomy's, at most 1) and **relevance** (the file's, 0-1);
- **decay** = ``0.5 ** (days / half-life)``, days since the last update, reinforcement or
  access (never negative: a memory dated in the future is not stronger than a fresh one);
  half-life 90 days, 30 for temporary types;
- **boost** = ``1 - (1 - BASE) × exp(-evidence)``, with
  ``evidence = USE_WEIGHT × uses + SHOWN_CEILING × (1 - exp(-shown / SHOWN_SCALE))``, where
  ``uses`` = times the agent drew on the memory (``used_count``: the stop hook found its
  distinctive terms in what the agent wrote or did after it was injected, once a session,
  :mod:`memdir.capture.uses`) + explicit reinforcements (``reinforced``: ``update(reinforce=True)``,
  the same content stored again), and ``shown`` = accesses (``access_count``: injected,
  recalled, returned by a search, read with ``get``).

So a memory never shown nor used has boost ``BASE`` (0.5); showing it, however often, adds
evidence of at most ``SHOWN_CEILING`` (as much as one use: boost at most 0.70); each use adds
``USE_WEIGHT`` (boost 0.70, 0.82, 0.89, 0.93 after 1-4 uses without shows) and the boost tends
to 1 without reaching it.

Invariants:
- Bounded: strength is in [0, 1] whatever the counts (weight, relevance, decay ≤ 1 and boost
  < 1; negative counts from a hand-edited file count as 0).
- Monotone and saturating: more shows or more uses never lower the boost, and each adds less
  than the one before.
- A show adds less than a use, from any counts: a show adds at most
  ``SHOWN_CEILING × (1 - exp(-1 / SHOWN_SCALE))`` = 0.048 of evidence, a use 0.5, and both
  act through the same ``exp(-evidence)``.
- One formula, three spellings: :func:`strength_of` (Python), :func:`boost_sql` (SQLite's
  ranking and the time-free strength key, :mod:`memdir.retrieval.ranking`, :mod:`memdir.core.index`)
  and the PostgreSQL store's stats (which call :func:`strength_of`). Tests hold the SQL equal to the
  Python.
"""

from __future__ import annotations

import math
from datetime import datetime

from memdir.core.model import Memory, now
from memdir.core.taxonomy import Taxonomy

__all__ = ["BASE", "HALF_LIFE_DAYS", "SHOWN_CEILING", "SHOWN_SCALE",
           "TEMPORARY_HALF_LIFE_DAYS", "USE_WEIGHT", "boost", "boost_sql", "strength",
           "strength_of", "type_factors"]

HALF_LIFE_DAYS = 90.0
TEMPORARY_HALF_LIFE_DAYS = 30.0
BASE = 0.5  # the boost of a memory never shown nor used
USE_WEIGHT = 0.5  # evidence per use (the agent drew on it) or explicit reinforcement
SHOWN_CEILING = 0.5  # all the evidence shows can give: as much as one use
SHOWN_SCALE = 10.0  # shows by which that ceiling is 63 % reached


def boost(shown: int, uses: int) -> float:
    """The usage factor in [BASE, 1): ``shown`` accesses, ``uses`` uses and reinforcements."""
    evidence = (USE_WEIGHT * max(0, uses)
                + SHOWN_CEILING * -math.expm1(-max(0, shown) / SHOWN_SCALE))
    return 1.0 - (1.0 - BASE) * math.exp(-evidence)


def boost_sql(shown: str, uses: str) -> str:
    """:func:`boost` as an SQLite expression over two SQL expressions (never NULL)."""
    return (f"(1.0 - {1.0 - BASE!r} * exp(-({USE_WEIGHT!r} * max(0, {uses}) + "
            f"{SHOWN_CEILING!r} * (1.0 - exp(-max(0, {shown}) / {SHOWN_SCALE!r})))))")


def type_factors(taxonomy: Taxonomy | None, type_name: str) -> tuple[float, float]:
    """(type weight, decay half-life in days) of a type; unknown types get modest defaults."""
    spec = taxonomy.lookup(type_name) if taxonomy else None
    weight = spec.weight if spec else 0.7
    return weight, TEMPORARY_HALF_LIFE_DAYS if spec and spec.temporary else HALF_LIFE_DAYS


def strength_of(weight: float, half_life: float, relevance: float, days: float,
                shown: int, uses: int) -> float:
    """The strength formula on plain numbers: ``days`` since the last update, reinforcement
    or access; ``shown`` accesses; ``uses`` = uses + explicit reinforcements."""
    decay = 0.5 ** (max(0.0, days) / half_life)
    return float(weight * relevance * decay * boost(shown, uses))


def strength(memory: Memory, taxonomy: Taxonomy | None, at: datetime | None = None) -> float:
    """A memory's strength at ``at`` (now by default), from its file and its usage counters."""
    weight, half_life = type_factors(taxonomy, memory.type)
    anchor = memory.updated
    if memory.last_accessed and memory.last_accessed > anchor:
        anchor = memory.last_accessed
    days = ((at or now()) - anchor).total_seconds() / 86400.0
    return strength_of(weight, half_life, memory.relevance, days, memory.access_count,
                       max(0, memory.reinforced) + memory.used_count)
