"""Conflicts: two memories that make a claim about the same subject with different values
or opposite polarity.

One rule (no LLM, so it runs on every ``memdir store`` and every plan), three uses: the
store-time warning (:func:`find_conflicts`, any type, any scope in play), consolidation's
``conflict`` operations and ``memdir doctor`` (:func:`conflicting_pairs`, over a whole store).

Two claims (the text before ``**Why:**`` / ``**How to apply:**``) conflict when:

- **laid side by side** (:func:`memdir.upkeep.alignment.align`) they differ in one value of
  the predicate: an amount ("port 8005" / "9999", "two" / "three approvals", "10 MB" /
  "10 GB"), a name of one kind ("Datadog" / "Grafana Loki", "Go" / "Rust", "us-east-1" /
  "eu-west-1"; an unknown name only where a value goes), opposites ("up" / "down",
  "read-only" / "read-write"), a negation; or the relation is reversed ("Redirect HTTP to
  HTTPS" / "HTTPS to HTTP"). A difference in the subject (before the predicate: "service
  172" / "service 271", "the API" / "the admin API") means two subjects: never a conflict,
  whatever else differs;
- or, in other words for the rest, the stance read by :func:`memdir.upkeep.claims.disagreement`
  flips (a preference reversed; a word one rejects and the other asserts, with
  ``POLARITY_CLOSE`` of the rest of the words the same, ``RULE_CLOSE`` for an action or a
  tool refused; an order reversed or antonyms, with ``CLOSE`` of them; one number replaced
  when the rest is the same words), between claims that share ``SAME_WORDS`` of their
  distinctive words (Jaccard), or for the store-time warning a topic (``TOPIC_OVERLAP`` of
  the shorter claim's topic words), and that name no other component or tool.

Over a whole store one more test holds: a subject given more than
:data:`memdir.upkeep.candidates.FANOUT` values is a list, not a conflict ("The payments
worker reads its settings from _" with five files); see :mod:`memdir.upkeep.candidates`,
which also finds the pairs to compare in bounded work per memory.

Which of the two is older (:class:`Conflict`, :func:`written_order`): ``updated``, to the
second; in one second, the files' nanosecond mtimes; else unknown, and the reason says so
(consolidation never lets a model's verdict archive one of such a pair).

A reported conflict is a warning for a person to read, never a refusal: both memories stay.

Invariants: :func:`conflict` and :func:`contradicts` are symmetric (in whether they find a
conflict); :func:`written_order` does not depend on the order of its arguments;
:func:`conflicting_pairs` does bounded work per memory (never every pair).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from functools import lru_cache

from memdir.core.model import Memory
from memdir.retrieval.similarity import content_words
from memdir.upkeep.alignment import Alignment, align, slots
from memdir.upkeep.candidates import (
    FANOUT,
    MAX_SLOTS,
    SLOT_WIDTH,
    skeletons,
    slot_key,
    word_neighbours,
)
from memdir.upkeep.claims import (
    Disagreement,
    asks,
    attribution,
    disagreement,
    read,
    reordered,
)
from memdir.upkeep.conflict_order import UNORDERED, Conflict, written_order
from memdir.upkeep.lexicon import FUNCTION, LIGHT, SEQUENCE, is_number, negation, stem
from memdir.upkeep.values import antonyms, is_verb, name_kind

__all__ = [
    "CLOSE",
    "MIN_SHARED",
    "POLARITY_CLOSE",
    "RESOLVE",
    "RULE_CLOSE",
    "SAME_WORDS",
    "TOPIC_OVERLAP",
    "UNORDERED",
    "Conflict",
    "amounts_replaced",
    "claim_of",
    "conflict",
    "conflicting_pairs",
    "contradicts",
    "find_conflicts",
    "opposite",
    "slot_keys",
    "topic_overlap",
    "written_order",
]

# How a person resolves a conflict (consolidate's output, doctor): rules never do it.
RESOLVE = ("keep the one that is right: edit or archive the other (`memdir archive ID`); or "
           "configure an LLM (MEMDIR_LLM) and run `memdir consolidate`: the newer then "
           "supersedes the older only when the model says it replaces it")
TOPIC_OVERLAP = 0.8
MIN_SHARED = 2
SAME_WORDS = 0.5  # the merge rule's word overlap (consolidate.MERGE_SIMILARITY)
_STRETCH = 4  # slots: a name of three words, or an amount with its unit and a word
CLOSE = 0.7  # the rest of two claims that differ by antonyms (numbers: all of the rest)
POLARITY_CLOSE = 0.6  # ... that differ in what one says no to
RULE_CLOSE = 0.4  # ... in an action or a tool one says no to ("Don't use pnpm; Y does it")

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


@lru_cache(maxsize=65536)
def claim_of(text: str) -> str:
    """The memory's claim: its text before the Why / How to apply explanation (the text
    itself when it has none, so :func:`memdir.upkeep.claims.read` reads it once for both rules)."""
    found = _CLAIM_END.search(text)
    return text[: found.start()] if found and found.start() > 0 else text


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=65536)
def _topic(claim: str) -> frozenset[str]:
    # The values themselves (numbers, "tabs" / "spaces") are what differs, not the topic.
    return frozenset(_stem(w) for w in content_words(claim)
                     if w not in _FUNCTION and w not in _VALUES and not w.isdigit())


def topic_overlap(a: str, b: str) -> tuple[int, float]:
    """Shared topic words of two texts' claims, and their share of the shorter claim's."""
    left, right = _topic(claim_of(a)), _topic(claim_of(b))
    shared = len(left & right)
    return shared, shared / min(len(left), len(right)) if left and right else 0.0


def contradicts(a: str, b: str, *, threshold: float = TOPIC_OVERLAP) -> bool:
    """Whether two memory texts make one claim with two values or two polarities (the
    store-time warning): :func:`conflict`, or on a shared topic (``threshold`` of the
    shorter claim's topic words) the stance rule of :func:`opposite`."""
    ca, cb = claim_of(a), claim_of(b)
    lined = None
    if comparable(ca, cb) and _one_stretch(ca, cb):  # the cheap tests first
        if asks(ca) or asks(cb):
            return False
        lined = align(ca, cb)
        if lined.verdict in ("conflict", "same", "converse", "subject"):
            return lined.verdict == "conflict"
    if _said(ca, cb) or asks(ca) or asks(cb):
        return False
    shared, overlap = topic_overlap(a, b)
    if shared >= MIN_SHARED and overlap >= threshold:
        return opposite(ca, cb, lined) is not None
    return conflict(a, b) is not None


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def conflict(a: str, b: str) -> str | None:
    """Why two memory texts make one claim with two values or two polarities (module
    docstring), or None."""
    ca, cb = claim_of(a), claim_of(b)
    if not comparable(ca, cb) or asks(ca) or asks(cb):
        return None  # a question claims nothing
    lined = None
    if _one_stretch(ca, cb):  # else the alignment finds no value conflict: the stance first
        lined = align(ca, cb)
        if lined.verdict in ("conflict", "same", "converse", "subject"):
            return lined.reason or None
    if _jaccard(read(ca).content, read(cb).content) < SAME_WORDS or _said(ca, cb):
        return None
    return opposite(ca, cb, lined)


def _said(ca: str, cb: str) -> bool:
    """Whether either claim is a chat statement ("Akib said: ..."): what one says at one
    moment ("I can't sleep" / "I slept well") is no standing claim for the stance rule, only
    the same words with one value changed conflict."""
    return attribution(ca) is not None or attribution(cb) is not None


def _one_stretch(ca: str, cb: str) -> bool:
    """Whether two claims could differ in one stretch (what remains past their common start
    and end is at most a value's length on each side) or hold the same slots in another
    order (a relation reversed): the only pairs where the alignment can find a conflict."""
    ka, kb = slot_keys(ca), slot_keys(cb)
    start = 0
    for x, y in zip(ka, kb, strict=False):
        if x != y:
            break
        start += 1
    end = 0
    limit = min(len(ka), len(kb)) - start
    while end < limit and ka[-1 - end] == kb[-1 - end]:
        end += 1
    if len(ka) - start - end <= _STRETCH and len(kb) - start - end <= _STRETCH:
        return True
    return sorted(ka) == sorted(kb) or (len(ka) == len(kb) and _keys(ca) == _keys(cb))


@lru_cache(maxsize=65536)
def slot_keys(claim: str) -> tuple[str, ...]:
    """The keys of a claim's slots, in order (cached)."""
    return tuple(s.key for s in slots(claim))


@lru_cache(maxsize=65536)
def _keys(claim: str) -> frozenset[str]:
    return frozenset(slot_keys(claim))


@lru_cache(maxsize=65536)
def content_keys(claim: str) -> frozenset[str]:
    """The claim's distinctive slot keys: no function, light or negation words."""
    return frozenset(s.key for s in slots(claim)
                     if s.kind != "neg" and s.key not in FUNCTION and s.key not in LIGHT)


def comparable(ca: str, cb: str) -> bool:
    """Whether two claims are close enough for either rule, by set arithmetic alone: at most
    a stretch of slots each that differ (the alignment's conflicts and merges), or
    ``SAME_WORDS`` of their distinctive words shared, less a margin for the two readings'
    differences (the stance rule decides on :func:`memdir.upkeep.claims.read`'s words)."""
    ka, kb = _keys(ca), _keys(cb)
    if len(ka ^ kb) <= 2 * SLOT_WIDTH + 2:
        return True
    return _jaccard(content_keys(ca), content_keys(cb)) >= SAME_WORDS - 0.15


def opposite(ca: str, cb: str, lined: Alignment | None = None) -> str | None:
    """Why two claims say opposite things by their stance, or None (the rule for claims
    that differ in more than one value). A disagreement; antonyms, a weak sign, only when
    the rest of the words are ``CLOSE`` to the same (Jaccard); one number replaced and
    crossed words, the weakest, only when the rest is the same words. The rest: the
    distinctive words without numbers and without the function and light verbs of the topic
    ("keep", "use", "make": "Keep the limit at 100" / "The limit is 120" is one claim).
    Two claims whose subjects differ (``lined``) never conflict."""
    reason = _stance(ca, cb)
    if reason is None:
        return None  # the common case, before the alignment: nothing opposed
    lined = lined or align(ca, cb)
    if lined.subject_differs or lined.names_differ:
        return None  # two things: "copy the billing tables ..." / "copy the search tables ..."
    return reason


def _stance(ca: str, cb: str) -> str | None:
    """:func:`opposite` without the test of what the claims are about."""
    wa, wb = _rest(ca), _rest(cb)
    found = disagreement(ca, cb)
    if found is None:
        found = _opposites(ca, cb)
    if found is None:  # the same words crossed: the same claim only if no other word differs
        crossed = reordered(ca, cb, relational=True)
        return crossed if crossed and wa == wb else None
    if found.kind in ("antonym", "order", "polarity"):
        # A weak sign: only with the rest of the words close to the same ("copy the billing
        # tables from staging to qa" / "copy the search tables from qa to staging": two jobs);
        # a polarity flipped, with most of them ("Never mock X; use the real one", not "no
        # ice creams ..." / "... have ice cream").
        close = CLOSE
        if found.kind == "polarity":  # a rule refused ("never pin ...") needs less of it
            close = RULE_CLOSE if all(is_verb(w) or name_kind(w) for w in found.words) \
                else POLARITY_CLOSE
            objects = _objects(ca, found.words), _objects(cb, found.words)
            if close == RULE_CLOSE and all(objects) and not objects[0] & objects[1]:
                return None  # "never run docker ..." / "always run opentofu ...": two rules
        return found.reason if _jaccard(wa - found.words, wb - found.words) >= close else None
    if found.kind == "numbers" and (wa != wb or not _one_number(ca, cb)):
        return None
    return found.reason


def _objects(claim: str, verbs: frozenset[str]) -> frozenset[str]:
    """The words right after each of ``verbs`` in a claim: what a rule does them to."""
    stems = read(claim).stems
    return frozenset(stems[n + 1] for n, w in enumerate(stems[:-1]) if w in verbs)


def _opposites(ca: str, cb: str) -> Disagreement | None:
    """Opposite words of :func:`memdir.upkeep.values.antonyms` that one claim says and the
    other does not ("opt-in" / "opt-out" in two wordings), as an antonym disagreement."""
    wa, wb = read(ca).words, read(cb).words
    for x in sorted(wa - wb):
        for y in sorted(wb - wa):
            if antonyms(x, y) and not {x, y} & SEQUENCE:  # "before" / "after": the order's
                return Disagreement("antonym", f"opposite words: {x!r} in one, {y!r} in the "
                                    "other", frozenset((stem(x), stem(y))))
    return None


def _one_number(ca: str, cb: str) -> bool:
    """Whether exactly one amount of one claim is replaced by one of the other ("limit at
    100" / "limit is 120"), not two ("service 172, port 8172" / "service 271, port 8271")."""
    only_a, only_b = amounts_replaced(ca, cb)
    return len(only_a) == 1 and len(only_b) == 1


@lru_cache(maxsize=65536)
def _amounts(claim: str) -> frozenset[str]:
    return frozenset(s.key for s in slots(claim) if s.kind == "amount")


def amounts_replaced(ca: str, cb: str) -> tuple[frozenset[str], frozenset[str]]:
    """The amounts of each claim that the other does not hold ("10%" / "10 GB")."""
    ka, kb = _amounts(ca), _amounts(cb)
    return ka - kb, kb - ka


def _rest(claim: str) -> frozenset[str]:
    """The claim's distinctive words, stemmed, but numbers and versions ("uuidv7"; a name
    with digits stays), negations and the topic's function words (told apart before
    stemming: "theme" is not "them")."""
    return frozenset(stem(w) for w in read(claim).words
                     if w not in _FUNCTION and not negation(w) and not is_number(w))


def find_conflicts(memory: Memory, candidates: Iterable[Memory]) -> list[Memory]:
    """The candidates (the memory's neighbours in the store) that ``memory`` contradicts,
    most relevant first. A value the neighbours give more than ``FANOUT`` others of is a
    list's, not a conflict's (:mod:`memdir.upkeep.candidates`)."""
    others = [c for c in candidates if c.id != memory.id and c.status == "active"]
    found = [c for c in others if contradicts(memory.body, c.body)]
    if found:
        keys = [slot_keys(claim_of(m.body)) for m in [memory, *others]]
        found = [c for c in found if not _listed(memory, c, keys)]
    return sorted(found, key=lambda m: -m.relevance)


def _listed(a: Memory, b: Memory, claims: Sequence[tuple[str, ...]]) -> bool:
    """Whether the one value two memories differ in is a slot that more than ``FANOUT``
    values fill among ``claims`` (their slot keys; a list): the claims with the same
    slots before and after it, and at most ``SLOT_WIDTH`` between."""
    claim = claim_of(a.body)
    lined = align(claim, claim_of(b.body))
    if lined.slot is None:
        return False
    mine = slot_keys(claim)
    start, end = lined.slot
    head, tail = mine[:start], mine[end:]
    fillers = {keys[start:len(keys) - len(tail)] for keys in claims
               if len(keys) <= MAX_SLOTS and 0 <= len(keys) - start - len(tail) <= SLOT_WIDTH
               and keys[:start] == head and keys[len(keys) - len(tail):] == tail}
    return len(fillers) > FANOUT


def conflicting_pairs(memories: Sequence[Memory], *,
                      deadline: float | None = None) -> list[Conflict]:
    """The pairs of the active memories given (any types and scopes) that conflict, the
    oldest pair first; the pairs compared come from :mod:`memdir.upkeep.candidates` (bounded
    work per memory), and a subject with more than ``FANOUT`` values in the store is a list,
    never a conflict. ``deadline`` (:func:`time.monotonic`): stop comparing then, with what
    was found so far."""
    # In one order whatever the order given, so a store's conflicts do not depend on it.
    active = sorted((m for m in memories if m.status == "active"), key=lambda m: (m.scope, m.id))
    claims = [claim_of(m.body) for m in active]
    keys = [slot_keys(c) for c in claims]
    index = skeletons(keys)
    pairs = set(index.pairs) | word_neighbours([content_keys(c) for c in claims])
    found = []
    for n, (i, j) in enumerate(sorted(pairs)):
        if deadline is not None and n % 256 == 0 and time.monotonic() > deadline:
            break
        if not conflict(claims[i], claims[j]):
            continue  # the cheap test first; the order only for the few that conflict
        older, newer, known = written_order(active[i], active[j])
        first = claims[i] if older is active[i] else claims[j]
        second = claims[j] if older is active[i] else claims[i]
        reason = conflict(first, second)
        if not reason:
            continue
        lined = align(first, second)
        if lined.slot is not None and slot_key(keys[i] if first is claims[i] else keys[j],
                                               *lined.slot) in index.lists:
            continue  # one of many values of a list ("Priya owns the _ service")
        found.append(Conflict(older, newer, reason, known))
    return sorted(found, key=lambda c: (c.older.updated, c.older.id, c.newer.id))
