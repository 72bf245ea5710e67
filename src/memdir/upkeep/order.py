"""Ordered pairs: what a text says comes first, read by rules for :mod:`memdir.upkeep.claims`.

"X before Y", "Y after X", "X first ... then Y" (across the clauses of one sentence) and
"from X to Y" each give (earlier, later) pairs of stems: every distinctive word of the
earlier phrase paired with every one of the later phrase. A phrase is the words right
before or right after the pivot (:func:`_phrase`), not the whole clause: in "CI runs unit
tests before integration tests" the pivot orders "CI runs unit tests" before "integration
tests", and a word in both phrases ("tests") orders nothing, so the subject or a shared
noun never makes a crossing against "CI runs integration tests after unit tests".

Invariant: "X before Y" and "Y after X" give the same pairs; :func:`ordered_pairs` is pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from memdir.upkeep.lexicon import (
    EARLIER,
    FUNCTION,
    LATER,
    LIGHT,
    PIVOTS,
    SEQUENCE,
    distinct,
    negation,
    stem,
)

__all__ = ["ordered_pairs"]


def ordered_pairs(sentences: Iterable[list[list[str]]]) -> dict[tuple[str, str], int]:
    """(earlier, later) -> how far the two words are from their pivot (a reason quotes the
    nearest pair), over sentences given as their clauses' tokens (lower case, in order)."""
    pairs: dict[tuple[str, str], int] = {}
    for clauses in sentences:
        earlier: list[str] = []
        later: list[str] = []
        for clause in clauses:
            _order(clause, pairs, earlier, later)
        _ordered(earlier[::-1], later, pairs)
    return pairs


def _phrase(clause: list[str], start: int, step: int) -> list[str]:
    """The stems of the phrase next to a pivot, the nearest first, read from ``start`` in
    direction ``step`` (-1: the phrase before it; 1: the phrase after it): function words
    next to the pivot are skipped ("after each deploy"), articles inside it kept out but
    passed ("run the linter"), and it ends at any other function word, a negation or
    another cue ("Run the tests with pytest before pushing": pytest | pushing)."""
    j = start
    while 0 <= j < len(clause) and (clause[j] in FUNCTION or clause[j] in LIGHT) \
            and clause[j] not in SEQUENCE and not negation(clause[j]):
        j += step
    out: list[str] = []
    while 0 <= j < len(clause):
        token = clause[j]
        if token in ("the", "a", "an"):
            j += step
            continue
        if token in FUNCTION or token in LIGHT or token in SEQUENCE or token in PIVOTS \
                or negation(token):
            break
        out.append(stem(token))
        j += step
    return out


def _ordered(earlier: list[str], later: list[str],
             pairs: dict[tuple[str, str], int]) -> None:
    """Add the (earlier, later) word pairs of two phrases, each the word nearest the pivot
    first; a pair's rank is how far its words are from the pivot (a reason quotes the
    nearest). A word in both phrases ("unit tests before integration tests") orders nothing,
    so it never makes a crossing."""
    first, second = set(earlier), set(later)
    for i, x in enumerate(earlier):
        for j, y in enumerate(later):
            if x not in second and y not in first:
                pairs[(x, y)] = min(i + j, pairs.get((x, y), i + j))


def _order(clause: list[str], pairs: dict[tuple[str, str], int], earlier: list[str],
           later: list[str]) -> None:
    """Ordered pairs of one clause, normalised to (earlier, later): "X before Y" and "Y
    after X" both give (X, Y), X and Y the phrases right before and after the pivot; "from
    X to Y" gives (X, Y). "first" / "then" spans are collected for the whole sentence."""
    for i, token in enumerate(clause):
        if token not in SEQUENCE:
            continue
        left, right = _phrase(clause, i - 1, -1), _phrase(clause, i + 1, 1)
        if token == "before":
            _ordered(left, right, pairs)
        elif token == "after":
            _ordered(right, left, pairs)
        elif token == "from":
            end = next((j for j in range(i + 1, len(clause)) if clause[j] in ("to", "into")),
                       None)
            if end is not None:
                _ordered(distinct(clause[i + 1:end])[::-1], _phrase(clause, end + 1, 1),
                         pairs)
        elif token in EARLIER:
            earlier.extend(distinct(clause[:i]) or distinct(clause[i + 1:]))
        elif token in LATER:
            before, after = distinct(clause[:i]), distinct(clause[i + 1:])
            later.extend(after if token == "then" or not before else before)
