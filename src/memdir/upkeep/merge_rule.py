"""The merge rule of consolidation: whether two memory texts say the same thing
(:func:`near_duplicate`), so that one may be archived into the other.

The same claim, never another value or another subject: the alignment of the two claims
(:mod:`memdir.upkeep.alignment`) finds no value that differs (an amount, a name, opposites, a
negation, roles swapped) and no subject of its own; the words of one are in the other (one
may add a detail, a date or a number in brackets), or only the grammar changed ("Never
force-push" / "Force-pushing is never allowed"); the numbers and negations agree; nothing
is read as a disagreement (:func:`memdir.upkeep.claims.disagreement`) or a reordering around
a pivot (:func:`memdir.upkeep.claims.reordered`).

Invariant: :func:`near_duplicate` is symmetric and pure.
"""

from __future__ import annotations

import re

from memdir.retrieval.similarity import similarity
from memdir.upkeep.alignment import align
from memdir.upkeep.claims import attribution, disagreement, read, reordered
from memdir.upkeep.conflicts import amounts_replaced, claim_of, comparable
from memdir.upkeep.lexicon import stem

__all__ = ["MERGE_SIMILARITY", "REWORDED_SIMILARITY", "near_duplicate"]

# Measured on the labelled pairs of tests/data/near_duplicates.jsonl (bench/merge.py, the
# table in docs/benchmarks.md): word overlap alone never reaches 0.9 precision (it cannot
# see "Postgres 15" vs "16", "do" vs "don't", "pnpm over npm" vs "npm over pnpm"), and
# embeddings score such pairs 0.9+ too. Overlap >= 0.5 plus the guards of near_duplicate
# merges no different facts: a missed merge costs little, a wrong one loses a fact.
MERGE_SIMILARITY = 0.5
# Two wordings whose distinctive words differ only in these (modality, permission, the verb
# that turns a fact into a rule) share fewer words; they merge from this overlap.
REWORDED_SIMILARITY = 0.4
_GRAMMAR = frozenset(stem(w) for w in """
    keep make must should need needs required require requires allowed allow ensure because
    since want wants can may will get stay set are being been ever
""".split())
_NUMBER = re.compile(r"\d+(?:[.:,]\d+)*")
_NEGATION = re.compile(r"\b(?:not|no|never|don't|dont|doesn't|isn't|without|disable\w*)\b")
_ARTICLES = frozenset("a an the".split())
_TOKENS = re.compile(r"[\w.+#-]+")
_INTENSIFIERS = frozenset("better rather more much far way".split())
# Where an added number is an aside, not a new fact: brackets, dates, years.
_ASIDE = re.compile(r"\([^)]*\)|\b\d{4}-\d{2}-\d{2}\b|\b(?:19|20)\d{2}\b")


def near_duplicate(a: str, b: str) -> bool:
    """Whether two memory texts say the same thing (the merge rule): enough shared words;
    the same numbers (one side may add a date or a number in brackets); the same negations;
    every distinctive word of one text in the other (nothing swapped: "dark" vs "light");
    and nothing read as a disagreement (:func:`memdir.upkeep.claims.disagreement`: a word one
    rejects and the other asserts, an order reversed, antonyms) or a reordering around a
    pivot (:func:`memdir.upkeep.claims.reordered`: "pnpm over npm" vs "npm over pnpm")."""
    said_a, said_b = attribution(a), attribution(b)
    if said_a or said_b:  # what was said, without who said it
        if said_a and said_b and said_a[0] != said_b[0]:
            return False  # two people's words are two memories
        a, b = said_a[1] if said_a else a, said_b[1] if said_b else b
        # One utterance said twice, word for word (case, punctuation and articles aside):
        # "How are you doing?" / "How have you been?" are two ("a movie" / "the recent
        # godzilla movie" too, not a detail added to one).
        return _utterance(a) == _utterance(b)
    if _preferences(a) & {(y, x) for x, y in _preferences(b) if x != y}:
        return False  # "just better than bazel" / "bazel better than just", fillers and all
    ca, cb = claim_of(a), claim_of(b)
    if similarity(a, b) < REWORDED_SIMILARITY and not comparable(ca, cb):
        return False  # the cheap test first
    if all(amounts_replaced(ca, cb)):
        return False  # a number swapped for another ("10%" / "10 GB"), before the alignment
    lined = align(ca, cb)  # cached, like read
    if lined.verdict in ("same", "converse"):
        return True  # the same slots, or one relation said both ways round
    if lined.verdict == "conflict" or lined.values_differ:
        return False
    ra, rb = read(a), read(b)
    small, large = sorted((ra, rb), key=lambda r: len(r.words))
    if small.words <= large.words and not (large.words - small.words) & large.added:
        if similarity(a, b) < MERGE_SIMILARITY:
            return False
    elif (ra.content ^ rb.content) - _GRAMMAR or similarity(a, b) < REWORDED_SIMILARITY:
        # Not a word swapped for another, nor another item added ("amd64" / "amd64 and
        # arm64"), unless only the grammar changed: "Never force-push" / "Force-pushing is
        # never allowed", "Tasks must be idempotent" / "Make tasks idempotent".
        return False
    low_a, low_b = a.lower(), b.lower()
    if not _same_numbers(low_a, low_b) or \
            set(_NEGATION.findall(low_a)) != set(_NEGATION.findall(low_b)):
        return False
    return disagreement(a, b) is None and reordered(a, b) is None


def _utterance(text: str) -> list[str]:
    words = (w.strip(".-") for w in _TOKENS.findall(text.lower().replace("’", "'")
                                                     .replace("'", "")))
    return [w for w in words if w and w not in _ARTICLES]


def _preferences(text: str) -> set[tuple[str, str]]:
    """(preferred, other) word pairs around "than", "over" and "instead of", as written
    (filler words included: a tool may be called "just")."""
    words = _TOKENS.findall(text.lower())
    pairs = set()
    for n, word in enumerate(words):
        if word not in ("than", "over", "instead") or n == 0 or n + 1 >= len(words):
            continue
        left = n - 1
        while left > 0 and words[left] in _INTENSIFIERS:
            left -= 1
        right = n + 2 if word == "instead" and words[n + 1] == "of" else n + 1
        if right < len(words):
            pairs.add((words[left], words[right]))
    return pairs


def _same_numbers(a: str, b: str) -> bool:
    """No number swapped for another, and none added outside a date or brackets: "cache for
    5 minutes" is not "5 minutes in staging and 60 in production"."""
    na, nb = set(_NUMBER.findall(a)), set(_NUMBER.findall(b))
    core_a, core_b = (set(_NUMBER.findall(_ASIDE.sub(" ", t))) for t in (a, b))
    return (na <= nb or nb <= na) and core_a == core_b
