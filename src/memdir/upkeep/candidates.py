"""Which pairs of a whole store are worth comparing, in work linear in the store's size.

Comparing every pair of 10,000 memories is 50 million comparisons; a conflict or a merge is
between memories that say nearly the same words, so two indexes find the pairs instead, with
a fixed bound of work per memory:

- **skeletons** (:func:`skeleton_keys`): a claim's slots (:func:`memdir.upkeep.alignment.slots`)
  with one stretch of up to ``SLOT_WIDTH`` slots cut out, keyed by what is left on either
  side. Two claims that differ in one stretch share a skeleton ("Service 5 listens on port
  _ in staging"). A skeleton filled by more than ``FANOUT`` different values in the store is
  a list, not a subject with competing values ("The payments worker reads its settings from
  _", "Deploys of _ go through ArgoCD"): its pairs are never conflicts, and it yields no pairs
  at all, which also bounds the work on stores written from one template.
- **rare words** (:func:`word_neighbours`): for the other rules (a preference or a polarity
  flipped, an order reversed), the ``NEIGHBOURS`` memories that share most of a memory's
  ``RARE_WORDS`` rarest distinctive words, through postings of at most ``POSTING_CAP``
  memories each.

For one new memory (the store-time warning) the index itself finds them:
:func:`neighbour_query` asks FTS5 for the memories holding every word of one of
``QUERY_GROUPS`` runs of the claim's words, ranked by all of them. A conflict differs in one
stretch of at most ``SLOT_WIDTH`` slots, which spoils at most two runs, so the other is
among the matches, and FTS5 ranks only those, not every memory sharing a common word.

Invariants: every pair of claims that differ in one stretch of at most ``SLOT_WIDTH`` slots
(each side) and whose skeleton is not a list is among the pairs; work and pairs per memory
are bounded by constants (claims longer than ``MAX_SLOTS`` slots are left to the rare-word
index).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["FANOUT", "MAX_SLOTS", "NEIGHBOURS", "POSTING_CAP", "QUERY_GROUPS", "RARE_WORDS",
           "SLOT_WIDTH", "Skeletons", "neighbour_query", "skeleton_keys", "skeletons", "slot_key",
           "word_neighbours"]

SLOT_WIDTH = 3
FANOUT = 3
MAX_SLOTS = 32  # also bounds a start to 6 bits in skeletons()
NEIGHBOURS = 8
RARE_WORDS = 4
POSTING_CAP = 64
QUERY_GROUPS = 3
SAME_CLAIM = 4  # copies of one claim paired with another value through at most this many

Key = int
_MIX = 1_000_003  # a prefix hash and a suffix hash into one key


def _hashes(keys: Sequence[str]) -> tuple[list[int], list[int]]:
    """Hashes of every prefix and every suffix of ``keys``, each in O(1) from the last."""
    pre, suf = [0] * (len(keys) + 1), [1] * (len(keys) + 1)
    for n, key in enumerate(keys):
        pre[n + 1] = hash((pre[n], key))
    for n in range(len(keys) - 1, -1, -1):
        suf[n] = hash((suf[n + 1], keys[n]))
    return pre, suf


def skeleton_keys(keys: Sequence[str]) -> Iterator[tuple[Key, tuple[str, ...]]]:
    """(skeleton, filler) for every stretch of 0 to ``SLOT_WIDTH`` slots of a claim. (Two
    skeletons may share a key by a hash collision: a pair compared for nothing, no more.)"""
    if len(keys) > MAX_SLOTS:
        return
    pre, suf = _hashes(keys)
    for i in range(len(keys) + 1):
        for width in range(min(SLOT_WIDTH, len(keys) - i) + 1):
            yield pre[i] * _MIX ^ suf[i + width], tuple(keys[i:i + width])


def slot_key(keys: Sequence[str], start: int, end: int) -> Key:
    """The skeleton of a claim with ``keys[start:end]`` cut out."""
    pre, suf = _hashes(keys)
    return pre[start] * _MIX ^ suf[end]


@dataclass(frozen=True)
class Skeletons:
    """The pairs that share a skeleton (index pairs, the smaller first) and the skeletons
    that are lists (more than ``FANOUT`` values)."""

    pairs: frozenset[tuple[int, int]]
    lists: frozenset[Key]


def skeletons(claims: Sequence[Sequence[str]]) -> Skeletons:
    """The skeleton index of a store's claims (their slot keys, in store order)."""
    # The hot loop of a plan: each skeleton's first member as one int (claim, start,
    # width), a list only from its second member on, and fillers only for those.
    first: dict[Key, int] = {}
    shared: dict[Key, list[int]] = {}
    for n, keys in enumerate(claims):
        size = len(keys)
        if size > MAX_SLOTS:
            continue
        pre, suf = _hashes(keys)
        for i in range(size + 1):
            head = pre[i] * _MIX
            for width in range(min(SLOT_WIDTH, size - i) + 1):
                key = head ^ suf[i + width]
                place = (n * 64 + i) * 4 + width
                if key not in first:
                    first[key] = place
                elif key in shared:
                    shared[key].append(place)
                else:
                    shared[key] = [first[key], place]
    pairs: set[tuple[int, int]] = set()
    lists: set[Key] = set()
    for key, places in shared.items():
        values: dict[tuple[str, ...], list[int]] = {}
        for place in places:
            n, width = place // 256, place % 4
            i = place // 4 % 64
            values.setdefault(tuple(claims[n][i:i + width]), []).append(n)
        if len(values) > FANOUT:
            lists.add(key)
            continue
        # Copies of one claim pair with the others through a few of them: the same claim.
        groups = [ids[:SAME_CLAIM] for ids in values.values()]
        for x, one in enumerate(groups):
            for other in groups[x + 1:]:
                pairs.update((min(i, j), max(i, j)) for i in one for j in other if i != j)
    return Skeletons(frozenset(pairs), frozenset(lists))


def word_neighbours(words: Sequence[frozenset[str]]) -> set[tuple[int, int]]:
    """Pairs of memories that share their rarest distinctive words (module docstring)."""
    postings: dict[str, list[int]] = {}
    for n, mine in enumerate(words):
        for w in mine:
            postings.setdefault(w, []).append(n)
    df = {w: len(found) for w, found in postings.items()}
    pairs: set[tuple[int, int]] = set()
    for n, mine in enumerate(words):
        rare = heapq.nsmallest(RARE_WORDS, ((df[w], w) for w in mine
                                            if 1 < df[w] <= POSTING_CAP))
        shared: dict[int, int] = {}
        for _, w in rare:
            for other in postings[w]:
                shared[other] = shared.get(other, 0) + 1
        shared.pop(n, None)
        if len(shared) > NEIGHBOURS:
            best = heapq.nsmallest(NEIGHBOURS, shared, key=lambda o: (-shared[o], o))
        else:
            best = list(shared)
        pairs.update((n, o) if n < o else (o, n) for o in best)
    return pairs


def neighbour_query(claim: str) -> str | None:
    """The FTS5 query for a claim's neighbours (module docstring): every word of one of
    ``QUERY_GROUPS`` runs of its words, and any of its words for the rank; a claim of fewer
    than four words, any of them. None when it has no word to search for."""
    from memdir.retrieval.search import query_terms

    terms = query_terms(claim)
    if not terms:
        return None

    def either(forms: tuple[str, ...]) -> str:
        return "(" + " OR ".join(f'"{form}"' for form in forms) + ")"

    anyone = " OR ".join(either(forms) for forms in terms)
    if len(terms) < 4:
        return anyone
    size = len(terms)
    runs = [terms[n * size // QUERY_GROUPS:(n + 1) * size // QUERY_GROUPS]
            for n in range(QUERY_GROUPS)]
    every = " OR ".join("(" + " AND ".join(either(f) for f in run) + ")" for run in runs if run)
    return f"({every}) AND ({anyone})"
