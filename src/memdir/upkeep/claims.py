"""What a memory text claims, read closely enough to tell "the same thing" from "the opposite".

Word overlap sees "I prefer pnpm over npm" and "I prefer npm over pnpm" as one text. Two
readings keep what overlap throws away, by rules (no model, no parser; the word lists are in
:mod:`memdir.upkeep.lexicon`):

- :class:`Reading`, the words: lower-cased tokens in order; hyphenated, dotted and slashed
  names stay whole (``force-push``, ``os.path``, ``3.12``, ``http/2``), lightly stemmed
  ("mocks", "mocking" -> "mock"). *Distinctive* tokens are those that are not function
  words. Numbers and versions ("15", "2026-03-10", "v2"), not digits inside a name.
- :class:`Stance`, what the text rejects, prefers and orders (read only for the pairs whose
  words already match). *Rejected*: the word a negation governs (its first distinctive word
  past articles and prepositions: "don't mock the clock" -> mock, "not in Git LFS" -> git)
  and the phrase a contrast sets aside: "X over Y" / "X to Y" after prefer, favour, choose;
  "X instead of Y", "X rather than Y", "X than Y", "X, not Y"; a contrast also records the
  pair (X, Y). A negation with a condition ("don't X without Y", "never X unless Y") is a
  rule about when, not a refusal: it rejects nothing. Words of clauses without a negation
  are *asserted*. *Ordered pairs* (:mod:`memdir.upkeep.order`): "X before Y" / "Y after
  X", "X first ... then Y", "from X to Y", as (earlier, later) word pairs.

Two texts *disagree* (:func:`disagreement`) when one prefers X over Y and the other Y over
X; when one rejects a word that the other, a plain statement with no negation or contrast,
asserts; when a pair one orders one way the other orders the other way; when one uses a
word and the other its antonym (enable / disable, always / never, min / max, ...); or when
they give numbers and neither set holds the other (quoted whole: "3.11", not "11"). Two
texts are *reordered* (:func:`reordered`) when a unit (a word, or a run of words the two
share in the same order) sits between X and Y in one and between Y and X in the other: "A
calls B" / "B calls A".
Moving a whole phrase ("In CI, run X" / "Run X in CI") never counts, only a crossing around
a pivot; nor does a crossing when only one of the texts has "by" (the passive voice: "B is
called by A").

Invariants: :func:`disagreement` and :func:`reordered` are symmetric in whether they find
something, and pure; a reason quotes the texts' own words.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from types import MappingProxyType

from memdir.upkeep.lexicon import (
    ADVERBS,
    ANTONYM,
    FUNCTION,
    LIGHT,
    NUMBER,
    PIVOTS,
    PREFER,
    SKIP,
    distinct,
    negation,
    stem,
)
from memdir.upkeep.order import ordered_pairs

__all__ = ["Disagreement", "Reading", "Stance", "asks", "attribution", "disagreement", "read",
           "reordered", "stance"]

_TOKEN = re.compile(r"[a-z0-9]+(?:['\-./][a-z0-9]+)*")
_CLAUSE = re.compile(r"[,;:.!?()\[\]]+(?:\s|$)|[;:!?()\[\]]|\s+[-\u2013\u2014]\s+|\n"
                     r"|\b(?:and|or|but|while|whereas|so)\b")
_SENTENCE = re.compile(r"[.;!?](?:\s|$)|\n")


# "Kevin said: ...": a chat statement, with who said it.
_SPEAKER = re.compile(r"\s*([^\n:]{1,60}?)\s+(?:said|says|wrote|asked)\s*:\s*", re.IGNORECASE)
_SENTENCES = re.compile(r"[^.!?\n]+[.!?]*")


@lru_cache(maxsize=65536)
def attribution(text: str) -> tuple[str, str] | None:
    """(who, what was said) of an attributed statement ("Kevin said: ..."), or None. What
    someone said at one moment is an event, not a standing claim about a subject."""
    found = _SPEAKER.match(text)
    return (found.group(1).strip().lower(), text[found.end():]) if found else None


@lru_cache(maxsize=65536)
def asks(text: str) -> bool:
    """Whether every sentence of a text is a question: it claims nothing ("Did you sleep
    well?", "Do you drink it iced or hot?")."""
    said = attribution(text)
    sentences = [p.strip() for p in _SENTENCES.findall(said[1] if said else text) if p.strip()]
    return bool(sentences) and all(p.endswith("?") for p in sentences)


def _clauses(text: str) -> list[list[str]]:
    return [_TOKEN.findall(part) for part in _CLAUSE.split(text) if part.strip()]


@dataclass(frozen=True)
class Reading:
    """The words of one text (module docstring): its stems in order, its distinctive words,
    its numbers; what it rejects, prefers and orders is its :class:`Stance`."""

    stems: tuple[str, ...]  # distinctive tokens and relational words, stemmed, in order
    content: frozenset[str]  # the distinctive stems (no relational words)
    numbers: frozenset[str]  # numbers and versions, a date or version with its parts
    whole: frozenset[str]  # numbers and versions as written, without their parts
    words: frozenset[str]  # distinctive tokens, not stemmed
    added: frozenset[str]  # tokens that follow "and" / "or": another item of a list
    all_stems: frozenset[str]  # every token, function words too (for the antonyms)
    passive: bool
    surface: tuple[tuple[str, str], ...]  # (stem, the first word with that stem)

    def word(self, stemmed: str) -> str:
        """The text's own word for a stem (reasons quote words, not stems)."""
        return next((w for s, w in self.surface if s == stemmed), stemmed)


@lru_cache(maxsize=65536)
def read(text: str) -> Reading:
    """The words of one text (cached: consolidation compares each text many times)."""
    low = text.lower().replace("\u2019", "'")
    tokens = _TOKEN.findall(low)
    named = set(re.findall(r"#(\d+)", low))  # "issue #123": a name, not a quantity
    whole = frozenset(t for t in tokens if NUMBER.fullmatch(t) and t not in named)
    return Reading(
        stems=tuple(t if t in PIVOTS else stem(t) for t in tokens if t in PIVOTS or (
            t not in FUNCTION and t not in LIGHT and not negation(t))),
        content=frozenset(distinct(tokens)),
        numbers=frozenset(part for t in whole for part in {t, *re.split(r"[.:,\-/]", t)}),
        whole=whole,  # 2024-06-03 has 2024 among the numbers, not among the whole ones
        words=frozenset(t for t in tokens if t not in FUNCTION and t not in LIGHT),
        added=frozenset(_added(tokens)),
        all_stems=frozenset(stem(t) for t in tokens),
        passive=" by " in f" {low} ",
        surface=tuple({stem(t): t for t in reversed(tokens)}.items()))


@dataclass
class _Collected:
    """What :func:`_polarity` collects over a text's clauses."""

    rejected: set[str] = field(default_factory=set)
    contrasted: set[str] = field(default_factory=set)
    preferred: set[str] = field(default_factory=set)
    contrasts: set[tuple[str, str]] = field(default_factory=set)
    asserted: set[str] = field(default_factory=set)
    negative: bool = False
    contrastive: bool = False


@dataclass(frozen=True)
class Stance:
    """What one text rejects, prefers and orders (module docstring); read only for the pairs
    whose words already match, so it is a step of its own."""

    rejected: frozenset[str]  # governed by a negation or a contrast
    contrasted: frozenset[str]  # governed by a contrast: "over Y", "instead of Y", ", not Y"
    preferred: frozenset[str]  # the X of "X over Y"
    contrasts: frozenset[tuple[str, str]]  # (X, Y) of "X over Y"
    asserted: frozenset[str]  # in clauses with no negation
    negative: bool  # a negation anywhere
    contrastive: bool  # a contrast anywhere
    # (earlier or source, later or target) -> how far the two words are from their pivot
    pairs: Mapping[tuple[str, str], int]


@lru_cache(maxsize=65536)
def stance(text: str) -> Stance:
    """The stance of one text (cached)."""
    low = text.lower().replace("\u2019", "'")
    found = _Collected()
    sentences = [_clauses(sentence) for sentence in _SENTENCE.split(low)]
    for clauses in sentences:
        _polarity(clauses, found)
    return Stance(frozenset(found.rejected), frozenset(found.contrasted),
                  frozenset(found.preferred), frozenset(found.contrasts),
                  frozenset(found.asserted), found.negative, found.contrastive,
                  MappingProxyType(ordered_pairs(sentences)))


def _added(tokens: list[str]) -> list[str]:
    return [tokens[i + 1] if tokens[i + 1] not in ("the", "a", "an") or i + 2 >= len(tokens)
            else tokens[i + 2]
            for i, t in enumerate(tokens[:-1]) if t in ("and", "or", "plus", "nor")]


def _span(clause: list[str], cue: int) -> list[int]:
    """The words a cue governs: past articles and prepositions, up to the next function
    word ("don't mock the clock" -> mock; "over deeply nested if blocks" -> deeply nested)."""
    j = cue + 1
    while j < len(clause) and (clause[j] in SKIP or negation(clause[j])
                               or clause[j] in ("rather", "instead", "than")):
        j += 1
    out = []
    while j < len(clause) and clause[j] not in FUNCTION and clause[j] not in SKIP \
            and not negation(clause[j]) and not clause[j][0].isdigit():
        out.append(j)
        j += 1
    return out


def _phrase_before(tokens: list[str]) -> list[str]:
    """The stems of the words right before a contrast, back to a function word: the X of
    "ruff format over black", "Vault rather than ..." (a cue word itself is skipped)."""
    out: list[str] = []
    for token in reversed(tokens):
        if token in ("rather", "instead") and not out:
            continue
        if token in FUNCTION or token in LIGHT or negation(token) or token in PREFER:
            break
        out.append(stem(token))
    return out[::-1]


def _object(tokens: list[str]) -> bool:
    """Whether the words between "prefer" and "over" / "to" are a plain object ("prefer
    httpx to aiohttp"), not a clause ("prefer PRs that are easy to review")."""
    return bool(distinct(tokens)) and all(t in SKIP or t in LIGHT or t not in FUNCTION
                                           for t in tokens)


def _polarity(clauses: list[list[str]], out: _Collected) -> None:
    """Mark what each negation or contrast governs as rejected (module docstring). A
    negation with a condition ("don't X without Y", "never X unless Y") is a rule about when,
    not a refusal: nothing in that clause is rejected."""
    previous: list[str] = []
    for clause in clauses:
        negations = [i for i, token in enumerate(clause) if negation(token)]
        conditional = len(negations) > 1 or "unless" in clause
        out.negative = out.negative or bool(negations)
        governed: set[int] = set()
        since = next((i for i, token in enumerate(clause) if token in PREFER), len(clause))
        for i, token in enumerate(clause):
            contrast = token in ("than", "instead") or (
                token in ("over", "to") and _object(clause[since + 1:i]))
            lead = i == 0 and negation(token) and bool(previous)  # "use X, not Y"
            if not contrast and not lead and not (negation(token) and not conditional):
                continue
            left = _phrase_before(previous if lead else clause[:i])
            contrast = contrast or lead
            # A contrast sets aside its whole phrase ("over deeply nested if blocks"); a
            # negation governs its first word ("never squash merge commits" -> squash).
            span = _span(clause, i) if contrast else _span(clause, i)[:1]
            governed.update(span)
            words = {stem(clause[j]) for j in span}
            out.rejected.update(words)
            if contrast:
                out.contrastive = True
                out.contrasted.update(words)
                out.preferred.update(left)
                out.contrasts.update((x, y) for x in left for y in words)
        if not negations or (negations == [0] and previous):
            out.asserted.update(stem(t) for i, t in enumerate(clause) if i not in governed
                                and t not in FUNCTION and t not in LIGHT
                                and not negation(t))
        previous = clause


@dataclass(frozen=True)
class Disagreement:
    """How two texts disagree: ``kind`` is preference, polarity, order, antonym or numbers;
    ``words`` the stems (or numbers) it turns on; ``reason`` says it for a person."""

    kind: str
    reason: str
    words: frozenset[str]


def disagreement(a: str, b: str) -> Disagreement | None:
    """How two texts say opposite things of what they share, or None: a preference or a
    polarity flipped, a pair ordered both ways, antonyms, other numbers."""
    ra, rb = read(a), read(b)
    sa, sb = stance(a), stance(b)
    reversed_ = sorted((x, y) for x, y in sa.contrasts if (y, x) in sb.contrasts
                       and (x, y) not in sb.contrasts)
    if reversed_:
        x, y = reversed_[0]
        return Disagreement("preference", f"one prefers {ra.word(x)!r} over {ra.word(y)!r}, "
                            f"the other {rb.word(y)!r} over {rb.word(x)!r}", frozenset((x, y)))
    for one, other, shown in ((sa, sb, rb), (sb, sa, ra)):
        # A plain statement (no negation, no contrast) against a negation or a contrast of it.
        if not other.negative and not other.contrastive:
            flipped = sorted((one.rejected - one.asserted - one.preferred) & other.asserted)
            if flipped:
                word = shown.word(flipped[0])
                return Disagreement("polarity", f"one says no to {word!r}, the other says yes "
                                    "to it", frozenset(flipped))
    crossed = sorted(((x, y) for x, y in sa.pairs if (y, x) in sb.pairs
                      and (x, y) not in sb.pairs and (y, x) not in sa.pairs),
                     key=lambda p: (p[0] in ADVERBS or p[1] in ADVERBS,
                                    sa.pairs[p] + sb.pairs[(p[1], p[0])], p))
    if crossed:
        x, y = crossed[0]
        return Disagreement("order", f"the order is reversed: {ra.word(x)!r} before "
                            f"{ra.word(y)!r} in one, after it in the other", frozenset((x, y)))
    for x, y in sorted(ANTONYM):
        if x in ra.all_stems and y in rb.all_stems and y not in ra.all_stems \
                and x not in rb.all_stems:
            return Disagreement("antonym", f"opposite words: {ra.word(x)!r} in one, "
                                f"{rb.word(y)!r} in the other", frozenset((x, y)))
    na, nb = ra.numbers, rb.numbers
    if na and nb and not (na <= nb or nb <= na):
        # Quoted as written: "3.11", not its parts "3" and "11" (a whole number of one text
        # that is a part of the other's, "2024" of "2024-06-03", is not other).
        only_a, only_b = sorted(ra.whole - nb), sorted(rb.whole - na)
        return Disagreement("numbers", f"other numbers: {', '.join(only_a)} in one, "
                            f"{', '.join(only_b)} in the other", na ^ nb)
    return None


def _units(stems: list[str], runs: set[tuple[str, str]]) -> list[tuple[str, ...]]:
    """Stems in order, adjacent ones both texts have in the same order joined into one unit
    ("auth service"), so a name of several words counts as one."""
    out: list[list[str]] = []
    for word in stems:
        if out and (out[-1][-1], word) in runs:
            out[-1].append(word)
        else:
            out.append([word])
    return [tuple(unit) for unit in out]


def reordered(a: str, b: str, *, relational: bool = False) -> str | None:
    """Why two texts cross the same words around a pivot, or None (module docstring):
    "pnpm over npm" / "npm over pnpm", "3 attempts, 2 s delay" / "2 attempts, 3 s delay".
    Only words that occur once in each text count, so each has one place. ``relational``:
    only a crossing around a relational word (over, than, to, from, ...) or of two numbers,
    which is never a paraphrase ("X needs Y" / "Y is needed for X" crosses around a verb)."""
    ra, rb = read(a), read(b)
    if ra.passive != rb.passive:  # "A calls B" / "B is called by A": the same claim
        return None
    ca, cb = Counter(ra.stems), Counter(rb.stems)
    once = {w for w, n in ca.items() if n == 1 and cb.get(w) == 1}
    sa, sb = [w for w in ra.stems if w in once], [w for w in rb.stems if w in once]
    runs = set(pairwise(sa)) & set(pairwise(sb))
    ua, ub = _units(sa, runs), _units(sb, runs)
    where = {unit: j for j, unit in enumerate(ub)}
    for i in range(1, len(ua) - 1):
        j = where.get(ua[i], 0)
        left, pivot, right = ua[i - 1], ua[i], ua[i + 1]
        if not (0 < j < len(ub) - 1 and ub[j - 1] == right and ub[j + 1] == left):
            continue
        numbers = all(w[0].isdigit() for w in (*left, *right))
        if relational and not (numbers or (set(pivot) & PIVOTS and len(pivot) <= 3)):
            continue
        x, p, y = (" ".join(ra.word(w) for w in u) for u in (left, pivot, right))
        return (f"the same words in another order: {x!r} {p!r} {y!r} in one, "
                f"{y!r} {p!r} {x!r} in the other")
    return None
