"""Hybrid ranking: BM25 and embedding similarity fused by reciprocal rank (DESIGN §4).

Reciprocal rank fusion scores a candidate ``sum(w / (k + rank))`` over the rankings it
appears in (rank 1 is the best). It needs no calibration between BM25's unbounded scores and
cosine similarities, and a candidate found by both rankings beats one found by either alone at
the same ranks. Strength then applies as the same bounded multiplier as in plain search
(0.75..1.25), so an old but exact match still wins over a fresh weak one.

Invariants:
- Pure Python on plain values: no numpy here (vector search lives in :mod:`memdir.embed`).
- Deterministic: ties break on the key, so the same inputs always give the same order.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

__all__ = ["RRF_K", "fuse", "rrf"]

RRF_K = 60  # the constant of Cormack et al. (2009); chosen again by measurement in bench/
K = TypeVar("K", bound=Hashable)


def rrf(rankings: Sequence[Sequence[K]], *, k: int = RRF_K,
        weights: Sequence[float] | None = None) -> dict[K, float]:
    """Reciprocal-rank-fusion score of every key in any ranking (best first in each)."""
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    scores: dict[K, float] = {}
    for n, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[n]
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return scores


def fuse(lexical: Sequence[K], semantic: Sequence[K], strength: Mapping[K, float], *,
         k: int = RRF_K, semantic_weight: float = 1.0,
         limit: int | None = None) -> list[tuple[K, float, float]]:
    """(key, final score, fused match) best first: RRF of the two rankings × the bounded
    strength factor of each key (0.75 for strength 0 .. 1.25 for strength >= 1)."""
    fused = rrf([lexical, semantic], k=k, weights=[1.0, semantic_weight])
    out = []
    for key, match in fused.items():
        factor = 0.75 + 0.5 * min(max(strength.get(key, 0.0), 0.0), 1.0)
        out.append((key, match * factor, match))
    out.sort(key=lambda t: (-t[1], str(t[0])))
    return out[:limit] if limit is not None else out
