"""Hybrid ranking: words and meaning fused on the score scale (DESIGN §4,
:mod:`memdir.retrieval.scale`).

Two fusions live here:

- :func:`fuse_scores` (the default of both stores): every candidate (the union of the best
  word matches and the nearest vectors) gets the absolute hybrid match of
  :func:`memdir.retrieval.scale.fused_match`, ``w × lexical evidence + (1 - w) × semantic
  evidence``, and the score of :func:`memdir.retrieval.scale.scored`. Nothing is rescaled over the
  candidates, so a memory scores the same for a query whichever other memories are candidates, and
  scores of different queries compare. Measured on REALTALK and MADial-Bench against the z-score
  fusion it replaced (docs/benchmarks.md): within a point on both sets.
- :func:`fuse` / :func:`rrf`: reciprocal rank fusion, ``sum(w / (k + rank))``, which needs
  ranks only (kept for callers that have no absolute lexical evidence; its scores are not on
  the scale).

Invariants:
- Pure Python on plain values: no numpy here (vector search lives in :mod:`memdir.retrieval.embed`).
- Deterministic: ties break on the key, so the same inputs always give the same order.
- :func:`fuse_scores`: ``lexical`` is evidence already on the scale (a key without it matched
  no query word: 0); a key without a cosine has no vector yet and is matched on its words
  alone. A candidate with no evidence (match 0) is dropped; the rest come
  best score first, with score <= match, both in [0, 1].
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

from memdir.retrieval.scale import LEXICAL_WEIGHT, fused_match, scored

__all__ = ["LEXICAL_WEIGHT", "RRF_K", "fuse", "fuse_scores", "rrf"]

RRF_K = 60  # the constant of Cormack et al. (2009)
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


def fuse_scores(candidates: Iterable[K], lexical: Mapping[K, float],
                semantic: Mapping[K, float], strength: Mapping[K, float], *,
                lexical_weight: float = LEXICAL_WEIGHT,
                limit: int | None = None) -> list[tuple[K, float, float]]:
    """(key, score, match) best score first, for every candidate with evidence.

    ``lexical``: lexical evidence in [0, 1] (:func:`memdir.retrieval.scale.lexical_evidence`; the
    PostgreSQL store passes ``ts_rank_cd`` with normalisation 32, ``rank / (rank + 1)``) of
    the candidates that matched words; ``semantic``: the cosine of those that have a vector;
    ``strength``: each key's strength (0 when absent).
    """
    if not 0.0 <= lexical_weight <= 1.0:
        raise ValueError("lexical_weight is a share: between 0 and 1")
    out = []
    for key in dict.fromkeys(candidates):
        words = min(max(lexical.get(key, 0.0), 0.0), 1.0)
        match = fused_match(words, semantic.get(key), lexical_weight=lexical_weight)
        if match > 0:
            out.append((key, scored(match, strength.get(key, 0.0)), match))
    out.sort(key=lambda t: (-t[1], str(t[0])))
    return out[:limit] if limit is not None else out
