"""Conflicts: two memories that are about the same thing and say opposite things of it.

Two uses, one rule (no LLM, so it runs on every ``memdir store`` and every plan):

- seed 004: "before saving a private feedback memory, check that it does not contradict a
  team feedback memory" (:func:`find_conflicts`, a warning at store time);
- consolidation and ``memdir doctor`` (:func:`conflicting_pairs`): memories of one type in
  one scope that disagree are reported as a conflict and never merged by rules.

Two memory texts conflict when their claims (the text before ``**Why:**`` / ``**How to
apply:**``) are about one thing and say opposite things of it:

- **one thing**: for the store-time warning (:func:`contradicts`), the same topic: at least
  ``MIN_SHARED`` topic words shared, and at least ``TOPIC_OVERLAP`` of the shorter claim's
  topic words (topic words are :func:`memdir.retrieval.similarity.content_words` without function
  and polarity words, lightly stemmed: "mocks", "mocking" -> "mock"). For consolidation and
  doctor (:func:`conflict`), the same claim: at least ``SAME_WORDS`` of the two claims'
  distinctive words shared (Jaccard). The topic is too loose there: in a store of thousands
  of memories written from templates ("Release steps: ... under 620 ms" / "... 865 ms") it
  paired unrelated memories, and a conflict holds both memories out of every merge and
  archive. The store-time warning accepts the same claim too ("Enable HTTP/2" and "Disable
  HTTP/2" share one topic word).
- **opposite**: one rule for both uses, :func:`opposite`: a disagreement
  (:func:`memdir.upkeep.claims.disagreement`: a word one rejects and the other asserts, a
  preference or an order reversed, antonyms, other numbers) or the same words crossed
  (:func:`memdir.upkeep.claims.reordered`: around a relational word such as over / to /
  from, or two numbers crossed). The weak signs count only when nothing else differs:
  antonyms when the rest of the words are ``CLOSE`` to the same; other numbers and crossed
  words when the rest is the same words ("Logs are kept for 30 days" / "Metrics are kept
  for 90 days" share a topic, but are two claims). The store-time warning used to accept
  any of them on a shared topic; now it misses an antonym beside another wording ("dark
  mode" / "the light theme", listed in ``tests/test_conflicts.py``).

Which of the two is older (:class:`Conflict`, :func:`written_order`): ``updated``, to the
second; in one second, the files' nanosecond mtimes; else unknown, and the reason says so
(consolidation never lets a model's verdict archive one of such a pair).

The threshold was chosen on the labelled pairs in ``tests/test_conflicts.py``
(contradictions, paraphrases, unrelated texts, same topic with the same polarity): the
lowest of the most accurate, for recall on long team memories. With :func:`opposite` as
strict as consolidation's, accuracy is flat from 0.8 to 1.0; 0.6 and 0.7 also warn about a
neighbouring claim ("Avoid network calls in unit tests" / "Integration tests make network
calls"); on ``tests/data/near_duplicates.jsonl`` 0.6 to 0.8 warn about the same pairs.
Word overlap cannot see number words ("two approvals" vs "one") nor tell every
neighbouring claim from the same one ("request bodies" vs "every request"); those pairs are
listed there as known misses. A reported conflict is a warning for a person to read, never
a refusal.

Invariants: :func:`conflict` and :func:`contradicts` are symmetric (in whether they find a
conflict); :func:`written_order` does not depend on the order of its arguments;
:func:`conflicting_pairs` finds every pair :func:`conflict` accepts without comparing every
pair (prefix filtering, tests/test_conflicts.py checks it against all pairs).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memdir.core.model import Memory
from memdir.retrieval.similarity import content_words
from memdir.upkeep.claims import disagreement, read, reordered
from memdir.upkeep.lexicon import is_number, negation, stem

__all__ = ["CLOSE", "CONFLICT_TYPES", "MIN_SHARED", "RESOLVE", "SAME_WORDS", "TOPIC_OVERLAP",
           "UNORDERED", "Conflict", "conflict", "conflicting_pairs", "contradicts",
           "find_conflicts", "opposite", "topic_overlap", "written_order"]

# Types whose memories tell the agent how to behave, across the presets: a private one that
# says the opposite of the team's is worth a warning.
CONFLICT_TYPES = frozenset({"feedback", "preference", "preferences", "policy", "principles"})
# How a person resolves a conflict (consolidate's output, doctor): rules never do it.
RESOLVE = ("keep the one that is right: edit or archive the other (`memdir archive ID`); or "
           "configure an LLM (MEMDIR_LLM) and run `memdir consolidate`: the newer then "
           "supersedes the older only when the model says it replaces it")
TOPIC_OVERLAP = 0.8
MIN_SHARED = 2
SAME_WORDS = 0.5  # the merge rule's word overlap (consolidate.MERGE_SIMILARITY)
CLOSE = 0.7  # the rest of two claims that differ by antonyms (numbers: all of the rest)
# Said of a conflict whose two memories were written in one second, in an unknown order.
UNORDERED = "; which was written first is unknown (the same second)"
# A file written in its memory's ``updated`` second has its mtime within this of that
# second's start (the second may end between the clock's reading and the write).
_WRITE_WINDOW_NS = 2_000_000_000

_CLAIM_END = re.compile(r"^\s*(?:\*\*)?(?:why|how to apply)\s*:?", re.IGNORECASE | re.MULTILINE)
# Values that differ between two claims about one topic ("tabs" / "spaces"): not topic words.
_VALUES = frozenset("tabs spaces rebase merge single double dark light sync async required "
                    "optional camelcase snake_case".split())
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
    """The memory's claim: its text before the Why / How to apply explanation (the text
    itself when it has none, so :func:`memdir.upkeep.claims.read` reads it once for both rules)."""
    found = _CLAIM_END.search(text)
    return text[: found.start()] if found and found.start() > 0 else text


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


def contradicts(a: str, b: str, *, threshold: float = TOPIC_OVERLAP) -> bool:
    """Whether two memory texts are about the same topic and say opposite things of it (the
    store-time warning): topic overlap or the same claim, and :func:`opposite` (the rule
    :func:`conflict` applies too)."""
    shared, overlap = topic_overlap(a, b)
    if shared >= MIN_SHARED and overlap >= threshold:
        return opposite(_claim(a), _claim(b)) is not None
    return conflict(a, b) is not None


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def conflict(a: str, b: str) -> str | None:
    """Why two memory texts make one claim two opposite ways (module docstring), or None:
    at least ``SAME_WORDS`` of their claims' distinctive words shared, and :func:`opposite`."""
    ca, cb = _claim(a), _claim(b)
    if _jaccard(read(ca).content, read(cb).content) < SAME_WORDS:
        return None
    return opposite(ca, cb)


def opposite(ca: str, cb: str) -> str | None:
    """Why two claims say opposite things, or None; the one rule of both uses. A
    disagreement; antonyms, a weak sign, only when the rest of the words are ``CLOSE`` to the
    same (Jaccard); other numbers and crossed words, the weakest, only when the rest is the
    same words. The rest: the distinctive words without numbers and without the function
    and light verbs of the topic ("keep", "use", "make": "Keep the limit at 100" / "The
    limit is 120" is one claim). "Logs are kept for 30 days" / "Metrics are kept for 90
    days", "staging ... port 5432" / "production ... port 5433", "stay under 620 ms" / "865
    ms" in two otherwise other texts, and "writer 3" / "writer 5" naming two items are
    not."""
    wa, wb = _rest(ca), _rest(cb)
    found = disagreement(ca, cb)
    if found is None:  # the same words crossed: the same claim only if no other word differs
        crossed = reordered(ca, cb, relational=True)
        return crossed if crossed and wa == wb else None
    if found.kind == "antonym":
        return found.reason if _jaccard(wa - found.words, wb - found.words) >= CLOSE else None
    if found.kind == "numbers" and wa != wb:
        return None
    return found.reason


def _rest(claim: str) -> frozenset[str]:
    """The claim's distinctive words, stemmed, but numbers and versions ("uuidv7"; a name
    with digits stays), negations and the topic's function words (told apart before
    stemming: "theme" is not "them")."""
    return frozenset(stem(w) for w in read(claim).words
                     if w not in _FUNCTION and not negation(w) and not is_number(w))


def find_conflicts(memory: Memory, candidates: Iterable[Memory]) -> list[Memory]:
    """The candidates (team memories) that ``memory`` contradicts, most relevant first."""
    found = [c for c in candidates
             if c.id != memory.id and c.status == "active" and contradicts(memory.body, c.body)]
    return sorted(found, key=lambda m: -m.relevance)


@dataclass(frozen=True)
class Conflict:
    """Two active memories of one type and scope that disagree, the older first.
    ``ordered``: False when which was written first cannot be known (:func:`written_order`);
    the two are then in id order and the reason says so."""

    older: Memory
    newer: Memory
    reason: str
    ordered: bool = True

    @property
    def explained(self) -> str:
        """The reason, with the order's caveat when it is not known."""
        return self.reason + ("" if self.ordered else UNORDERED)

    def to_dict(self) -> dict[str, object]:
        return {"memories": [self.older.id, self.newer.id], "reason": self.explained,
                "scope": self.older.scope, "type": self.older.type}


def written_order(a: Memory, b: Memory) -> tuple[Memory, Memory, bool]:
    """(older, newer, known): which of two memories was written first. ``updated`` is stored
    to the second, so two written in one second tie; then the files' nanosecond mtimes
    decide, when both were last written in that second (a file copied, checked out or put
    back by ``undo`` has a later mtime than its ``updated``). Otherwise (the PostgreSQL
    store has no file; a fixed clock) the order is unknown: id order, and ``known`` False."""
    if a.updated != b.updated:
        return (a, b, True) if a.updated < b.updated else (b, a, True)
    ta, tb = _written_ns(a), _written_ns(b)
    if ta is not None and tb is not None and ta != tb:
        return (a, b, True) if ta < tb else (b, a, True)
    return (a, b, False) if a.id <= b.id else (b, a, False)


def _written_ns(memory: Memory) -> int | None:
    """When the memory's file was last written, in ns, if that was its ``updated`` second."""
    if memory.path is None:
        return None
    try:
        mtime = memory.path.stat().st_mtime_ns
    except OSError:
        return None
    since = mtime - int(memory.updated.timestamp()) * 1_000_000_000
    return mtime if 0 <= since < _WRITE_WINDOW_NS else None


def conflicting_pairs(memories: Sequence[Memory]) -> list[Conflict]:
    """Every pair of the active memories given, of one type and scope, that :func:`conflict`
    accepts, the oldest pair first; without comparing every pair.

    Prefix filtering (AllPairs): with the words of every claim in one order (rarest first),
    two claims sharing ``o`` words have the first shared word within the first ``len - o +
    1`` words of each. Jaccard >= t means ``o >= t * len`` of the longer claim and ``o >=
    2t / (1 + t) * len`` of the shorter, so memories are visited shortest first, each probes
    the index with its first ``len - ceil(t * len) + 1`` words, then enters its first ``len -
    ceil(2t / (1 + t) * len) + 1``, and only the pairs that meet there are compared."""
    active = sorted((m for m in memories if m.status == "active"),
                    key=lambda m: len(read(_claim(m.body)).content))
    words = [read(_claim(m.body)).content for m in active]
    sizes = [len(mine) for mine in words]
    counts: dict[tuple[str, str, str], int] = {}
    for m, mine in zip(active, words, strict=True):
        for w in mine:
            counts[(m.type, m.scope, w)] = counts.get((m.type, m.scope, w), 0) + 1
    rank = {key: n for n, key in enumerate(sorted(counts, key=lambda k: (counts[k], k)))}
    t = SAME_WORDS
    index: dict[int, list[int]] = {}
    found = []
    for i, (m, mine) in enumerate(zip(active, words, strict=True)):
        keys = sorted(rank[(m.type, m.scope, w)] for w in mine)  # the rarest word first
        size = len(keys)
        candidates: set[int] = set()
        for key in keys[: size - math.ceil(t * size - 1e-9) + 1]:  # shorter ones whose prefix
            candidates.update(index.get(key, ()))          # meets this one's
        smallest = t * size
        for j in candidates:
            if sizes[j] < smallest:
                continue  # too short to share half of the words
            theirs = words[j]
            shared = len(mine & theirs)
            if shared < t * (size + sizes[j] - shared):
                continue  # the cheap test first: most candidates share too few words
            older, newer, known = written_order(m, active[j])
            reason = conflict(older.body, newer.body)
            if reason:
                found.append(Conflict(older, newer, reason, known))
        for key in keys[: size - math.ceil(2 * t * size / (1 + t) - 1e-9) + 1]:
            index.setdefault(key, []).append(i)
    return sorted(found, key=lambda c: (c.older.updated, c.older.id, c.newer.id))
