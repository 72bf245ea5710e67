"""Conflicts (seed 004): a private feedback memory that contradicts a team one.

"Before saving a private feedback memory, check that it does not contradict a team feedback
memory." Two memory texts conflict when they are about the same thing and say opposite
things about it. A rule, no LLM, so it runs on every ``memdir store``:

- **same topic**: their claims (the text before ``**Why:**`` / ``**How to apply:**``) share
  at least ``MIN_SHARED`` topic words, and at least ``TOPIC_OVERLAP`` of the shorter claim's
  topic words. Topic words are :func:`memdir.similarity.content_words` without function words
  and polarity words, lightly stemmed ("mocks", "mocking" -> "mock").
- **opposite**: one claim is negative and the other not (a negation such as not / never /
  don't / avoid / instead of, a superset of consolidation's ``_NEGATION``); or both give
  numbers and neither set contains the other ("line length 100" vs "120"); or one says a
  value the other names the alternative of ("tabs" vs "spaces", "rebase" vs "merge").

The threshold was chosen on the labelled pairs in ``tests/test_conflicts.py``
(contradictions, paraphrases, unrelated texts, same topic with the same polarity): accuracy
is flat from 0.6 to 0.8 and the lowest keeps recall for long team memories. Word overlap
cannot see number words ("two approvals" vs "one") nor tell a neighbouring claim ("unit"
vs "integration" tests) from the same one; those pairs are listed there as known misses. A
reported conflict is a warning for a person to read, never a refusal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memdir.model import Memory
from memdir.similarity import content_words

__all__ = ["CONFLICT_TYPES", "MIN_SHARED", "TOPIC_OVERLAP", "contradicts", "find_conflicts",
           "topic_overlap"]

# Types whose memories tell the agent how to behave, across the presets: a private one that
# says the opposite of the team's is worth a warning.
CONFLICT_TYPES = frozenset({"feedback", "preference", "preferences", "policy", "principles"})
TOPIC_OVERLAP = 0.6
MIN_SHARED = 2

_NEGATIVE = re.compile(
    r"\b(?:not|no|never|don't|dont|doesn't|isn't|aren't|shouldn't|mustn't|can't|cannot|"
    r"won't|without|nor|avoid\w*|disable\w*|forbid\w*|prohibit\w*|skip\w*|stop|instead|rather)\b")
_NUMBER = re.compile(r"\d+(?:[.:,]\d+)*")
_CLAIM_END = re.compile(r"^\s*(?:\*\*)?(?:why|how to apply)\s*:?", re.IGNORECASE | re.MULTILINE)
# Pairs of values where saying one is saying "not the other" about the same thing.
_ALTERNATIVES = (("tabs", "spaces"), ("rebase", "merge"), ("single", "double"),
                 ("dark", "light"), ("sync", "async"), ("required", "optional"),
                 ("before", "after"), ("camelcase", "snake_case"))
_VALUES = frozenset(w for pair in _ALTERNATIVES for w in pair)
_FUNCTION = frozenset("""
    the and for with that this these those are was were been being from into onto when then
    than our your you use uses using used all any can could should would must may might have
    has had its their they them there here what which who whom how why apply applies also
    only each every per via too very will shall about after before over under more most less
    just even still some such other others same both either does did doing done make makes
    made get gets got let lets need needs want wants way ways thing things because while
    always never not nor dont don't doesn't isn't aren't shouldn't mustn't can't cannot won't
    without avoid instead rather stop skip prefer prefers preferred please keep one
""".split())


def _claim(text: str) -> str:
    """The memory's claim: its text before the Why / How to apply explanation."""
    found = _CLAIM_END.search(text)
    head = text[: found.start()] if found and found.start() > 0 else text
    return head.lower().replace("\u2019", "'")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _topic(claim: str) -> frozenset[str]:
    # The values themselves (numbers, "tabs" / "spaces") are what differs, not the topic.
    return frozenset(_stem(w) for w in content_words(claim)
                     if w not in _FUNCTION and w not in _VALUES and not w.isdigit())


def topic_overlap(a: str, b: str) -> tuple[int, float]:
    """Shared topic words of two texts' claims, and their share of the shorter claim's."""
    left, right = _topic(_claim(a)), _topic(_claim(b))
    shared = len(left & right)
    return shared, shared / min(len(left), len(right)) if left and right else 0.0


def _opposite(a: str, b: str) -> bool:
    if bool(_NEGATIVE.search(a)) != bool(_NEGATIVE.search(b)):
        return True
    na, nb = set(_NUMBER.findall(a)), set(_NUMBER.findall(b))
    if na and nb and not (na <= nb or nb <= na):
        return True
    wa, wb = set(re.findall(r"[\w']+", a)), set(re.findall(r"[\w']+", b))
    return any((x in wa and y in wb and y not in wa and x not in wb)
               or (y in wa and x in wb and x not in wa and y not in wb)
               for x, y in _ALTERNATIVES)


def contradicts(a: str, b: str, *, threshold: float = TOPIC_OVERLAP) -> bool:
    """Whether two memory texts are about the same thing and say opposite things of it."""
    shared, overlap = topic_overlap(a, b)
    if shared < MIN_SHARED or overlap < threshold:
        return False
    return _opposite(_claim(a), _claim(b))


def find_conflicts(memory: Memory, candidates: Iterable[Memory]) -> list[Memory]:
    """The candidates (team memories) that ``memory`` contradicts, most relevant first."""
    found = [c for c in candidates
             if c.id != memory.id and c.status == "active" and contradicts(memory.body, c.body)]
    return sorted(found, key=lambda m: -m.relevance)
