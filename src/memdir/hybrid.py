"""Hybrid ranking: BM25 and embedding similarity fused (DESIGN §4).

Two fusions live here:

- :func:`fuse_scores` (the SQLite index's default, chosen by ``bench/quality.py``): a convex
  combination of z-normalised scores. Over the candidates (the union of the best BM25 matches
  and the nearest vectors), each signal is turned into a z-score (minus its mean over the
  candidates, divided by its standard deviation there), and the match is
  ``w × z(BM25) + (1 - w) × z(cosine)``, rescaled to [0, 1] over the candidates. Unlike rank
  fusion it keeps *how far* ahead a candidate is: a memory whose BM25 score towers over the
  rest is not pulled level with one that is merely first by a hair of cosine. Measured on
  REALTALK and MADial-Bench against RRF with the same pools (docs/benchmarks.md), it gains on
  both sets, on both halves of each.
- :func:`fuse` / :func:`rrf`: reciprocal rank fusion, ``sum(w / (k + rank))``, which needs
  ranks only (the PostgreSQL store's hybrid search, whose tsvector rank is not BM25).

Either way strength then applies as the same bounded multiplier as in plain search
(0.75..1.25), so an old but exact match still wins over a fresh weak one.

Invariants:
- Pure Python on plain values: no numpy here (vector search lives in :mod:`memdir.embed`).
- Deterministic: ties break on the key, so the same inputs always give the same order.
- :func:`fuse_scores`: a candidate without a BM25 score matched no query word as well as the
  lexical pool did (its BM25 counts as 0); one without a cosine has no vector yet (its cosine
  counts as the candidates' mean: neither for nor against it). A signal that is equal for
  every candidate (or absent) carries no information and drops out. The match is in [0, 1]:
  1 for the best fused candidate (and for a lone one), 0 for the worst.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

__all__ = ["LEXICAL_WEIGHT", "MIN_COSINE_SPREAD", "MIN_LEXICAL_SPREAD", "RRF_K", "fuse",
           "fuse_scores", "rrf", "zscores"]

RRF_K = 60  # the constant of Cormack et al. (2009)
#: BM25's share of the fused z-score (the cosine gets the rest); bench/quality.py tuned it on
#: half of each dataset (0.35..0.5 is a plateau, 0.4 the middle of it).
LEXICAL_WEIGHT = 0.4
#: The least spread a signal is divided by, so near-equal scores stay near-equal instead of
#: being stretched to a whole standard deviation (a few candidates, or a signal that cannot
#: tell them apart): a cosine difference under ~0.05 is MiniLM noise; BM25 has no absolute
#: scale, so its floor is a share of the best score. Neither changes the benchmarks' results.
MIN_COSINE_SPREAD = 0.05
MIN_LEXICAL_SPREAD = 0.1
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


def _factor(strength: float) -> float:
    return 0.75 + 0.5 * min(max(strength, 0.0), 1.0)


def _ranked(fused: Mapping[K, float], strength: Mapping[K, float],
            limit: int | None) -> list[tuple[K, float, float]]:
    out = [(key, match * _factor(strength.get(key, 0.0)), match) for key, match in fused.items()]
    out.sort(key=lambda t: (-t[1], str(t[0])))
    return out[:limit] if limit is not None else out


def fuse(lexical: Sequence[K], semantic: Sequence[K], strength: Mapping[K, float], *,
         k: int = RRF_K, semantic_weight: float = 1.0,
         limit: int | None = None) -> list[tuple[K, float, float]]:
    """(key, final score, fused match) best first: RRF of the two rankings × the bounded
    strength factor of each key (0.75 for strength 0 .. 1.25 for strength >= 1)."""
    return _ranked(rrf([lexical, semantic], k=k, weights=[1.0, semantic_weight]), strength,
                   limit)


def zscores(values: Sequence[float], *, min_spread: float = 0.0) -> list[float]:
    """``(v - mean) / max(standard deviation, min_spread)`` of each value; all 0 when they are
    all equal."""
    if not values:
        return []
    mean = math.fsum(values) / len(values)
    sd = max(math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)), min_spread)
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return [0.0] * len(values)
    return [(v - mean) / sd for v in values]


def fuse_scores(candidates: Iterable[K], lexical: Mapping[K, float],
                semantic: Mapping[K, float], strength: Mapping[K, float], *,
                lexical_weight: float = LEXICAL_WEIGHT,
                limit: int | None = None) -> list[tuple[K, float, float]]:
    """(key, final score, fused match) best first, for every candidate.

    ``lexical``: BM25 match (higher is better) of the candidates that matched; ``semantic``:
    cosine similarity of those that have a vector. The match is the convex combination
    ``lexical_weight × z(BM25) + (1 - lexical_weight) × z(cosine)`` over the candidates
    (each z divided by at least its minimum spread), rescaled to [0, 1]; the final score
    multiplies it by the bounded strength factor.
    """
    if not 0.0 <= lexical_weight <= 1.0:
        raise ValueError("lexical_weight is a share: between 0 and 1")
    keys = list(dict.fromkeys(candidates))
    if not keys:
        return []
    known = [semantic[key] for key in keys if key in semantic]
    neutral = math.fsum(known) / len(known) if known else 0.0
    bm25 = [lexical.get(key, 0.0) for key in keys]
    words = zscores(bm25, min_spread=MIN_LEXICAL_SPREAD * max(abs(v) for v in bm25))
    meaning = zscores([semantic.get(key, neutral) for key in keys], min_spread=MIN_COSINE_SPREAD)
    mixed = [lexical_weight * w + (1.0 - lexical_weight) * m for w, m in zip(words, meaning,
                                                                          strict=True)]
    low, high = min(mixed), max(mixed)
    span = high - low
    fused = {key: (value - low) / span if span > 1e-12 else 1.0
             for key, value in zip(keys, mixed, strict=True)}
    return _ranked(fused, strength, limit)
