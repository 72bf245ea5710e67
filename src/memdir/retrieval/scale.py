"""The score scale: what a hit's ``match`` and ``score`` mean, in every search and interface.

A hit's **match** is the evidence that the memory answers the query, in [0, 1]:

- *Lexical evidence* (the query's words): ``1 - exp(-LEXICAL_SATURATION × r)``, where
  ``r = BM25(memory, query) / Σ idf(word)`` over the query's words. The denominator is the
  BM25 of a memory holding every query word once, in its body, at average length, so ``r``
  is 1 for such a memory, 0 for one with no query word, and at most ``k1 + 1 = 2.2`` (FTS5's
  term saturation). The idf is FTS5's own, ``log((N - n + 0.5) / (n + 0.5))`` clamped to
  1e-6, so a tiny idf (a word in half the memories of a small store) cancels out in the
  ratio instead of printing ``2e-06``. A word with several searched forms (``deploy`` /
  ``deployment``) counts once, with the rarest form present; a word in no memory counts with
  the idf of a word in none (a query of three words of which the store knows one is at most
  a third matched).
- *Semantic evidence* (meaning): the cosine rescaled from ``SIMILARITY_FLOOR`` (0: below it a
  MiniLM neighbour is unrelated text) to ``COSINE_FULL`` (1), clamped.
- Words-only search: the match is the lexical evidence. Hybrid search:
  ``LEXICAL_WEIGHT × lexical + (1 - LEXICAL_WEIGHT) × semantic``; a memory without a vector
  yet (and a session chunk, which has none) is matched on its words alone.

The **score** applies strength: ``score = 1 - (1 - match) ** f``, with the strength factor
``f = 0.6 + 0.4 × min(strength, 1)`` (0.6 for a dead memory, 1 for a strong one). So
``score <= match``, both stay in [0, 1], and in words-only search ``score = 1 - exp(-c·r·f)``
orders hits exactly as BM25 × the strength factor did. Hits are ranked by score (ties by
file), so the order shown is the score order.

Invariants:
- A hit's match depends only on the memory, the query, and the index's term statistics (N,
  each word's n, average length: what BM25 itself uses), never on which other memories are
  candidates, on the pool sizes or on the limit: the same pair scores the same in a filtered
  search, with a smaller limit, or next to other queries' hits.
- No evidence, no hit: a candidate that matched no query word and whose cosine is at or
  below the floor (match 0) is never returned. Any evidence makes a match of at least
  ``MIN_MATCH`` (0.001, so it never prints as 0.000), through a strictly increasing map that
  ties nothing: in a small store a word held by half the memories or more has almost no idf
  (FTS5 clamps it to 1e-6), so next to a rarer or unknown query word its share is tiny.
- Pure functions on plain numbers: no SQLite here (the statistics come from
  :func:`memdir.retrieval.search.idf_total`), so the PostgreSQL store can use the same scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "COSINE_FULL",
    "LEXICAL_SATURATION",
    "LEXICAL_WEIGHT",
    "MIN_MATCH",
    "SIMILARITY_FLOOR",
    "fused_match",
    "ideal_bm25",
    "idf",
    "lexical_evidence",
    "scored",
    "semantic_evidence",
    "strength_factor",
]

#: Lexical evidence's share of a hybrid match (the cosine gets the rest), tuned with the two
#: saturation constants below on half A of bench/quality.py's sets (bench/fusion_cache.py).
LEXICAL_WEIGHT = 0.45
#: c in ``1 - exp(-c r)``: r = 1 (every word once, average length) gives 0.53, a name match
#: (r ≈ 1.8) 0.75, BM25's ceiling (r = 2.2) 0.81.
LEXICAL_SATURATION = 0.75
#: Cosine below which MiniLM neighbours are unrelated text: no semantic evidence.
SIMILARITY_FLOOR = 0.2
#: Cosine at which semantic evidence is full (MiniLM paraphrases score 0.7-0.9).
COSINE_FULL = 0.8
#: The least match a hit needs: the resolution of a score shown with three decimals.
MIN_MATCH = 0.001
IDF_FLOOR = 1e-6  # what FTS5 clamps a non-positive idf to


def idf(rows: int, holding: int) -> float:
    """FTS5's idf of a phrase found in ``holding`` of ``rows`` rows."""
    # A concurrent write between the two counts can leave more holding rows than rows.
    holding = min(max(holding, 0), rows)
    value = math.log((rows - holding + 0.5) / (holding + 0.5)) if rows > 0 else 0.0
    return value if value > 0 else IDF_FLOOR


def ideal_bm25(rows: int, counts: Sequence[Sequence[int]]) -> float:
    """The BM25 of a memory holding each query word once at average length (all weights 1):
    the sum over the words (``counts``: per word, the rows holding each of its searched forms)
    of the word's idf, the rarest form present, or the idf of a word found nowhere."""
    total = 0.0
    for forms in counts:
        present = [idf(rows, n) for n in forms if n > 0]
        total += max(present) if present else idf(rows, 0)
    return total


def _floored(evidence: float) -> float:
    """Any evidence at all is at least ``MIN_MATCH``: ``MIN_MATCH + (1 - MIN_MATCH) × e``, a
    strictly increasing map, so the floor never ties two hits that evidence told apart."""
    return MIN_MATCH + (1.0 - MIN_MATCH) * min(evidence, 1.0) if evidence > 0 else 0.0


def lexical_evidence(bm25: float, ideal: float) -> float:
    """Evidence in [0, 1) from a BM25 score (higher is better) relative to ``ideal``; a word
    match is evidence, so it is never below ``MIN_MATCH``."""
    if bm25 <= 0 or ideal <= 0:
        return 0.0
    return _floored(-math.expm1(-LEXICAL_SATURATION * bm25 / ideal))


def semantic_evidence(cosine: float) -> float:
    """Evidence in [0, 1] from a cosine: 0 at the similarity floor, 1 at ``COSINE_FULL``."""
    return min(max((cosine - SIMILARITY_FLOOR) / (COSINE_FULL - SIMILARITY_FLOOR), 0.0), 1.0)


def fused_match(lexical: float, cosine: float | None, *,
                lexical_weight: float = LEXICAL_WEIGHT) -> float:
    """A hybrid match from lexical evidence and a cosine (None: no vector, words alone)."""
    if cosine is None:
        return lexical
    return _floored(lexical_weight * lexical + (1.0 - lexical_weight) * semantic_evidence(cosine))


def strength_factor(strength: float) -> float:
    """The exponent strength applies to a match: 0.6 (strength 0) .. 1.0 (strength >= 1)."""
    return 0.6 + 0.4 * min(max(strength, 0.0), 1.0)


def scored(match: float, strength: float) -> float:
    """The score of a match in [0, 1] for a memory of ``strength``: ``1 - (1 - match) ** f``."""
    match = min(max(match, 0.0), 1.0)
    return 1.0 - float((1.0 - match) ** strength_factor(strength))
