"""One claim read into *slots* for :mod:`memdir.upkeep.alignment`: its tokens in order,
each with a key to compare and a kind, and where its predicate starts.

:func:`slots`: lower-cased tokens, lightly stemmed; number words as numbers and a number
with its unit as one amount (:func:`memdir.upkeep.values.quantity`: "10 MB", "two", "30s");
"don't" as "do" + "not"; copulas ("is", "are", ":", "=") as one token ``BE``; articles and
fillers (:data:`memdir.upkeep.values.ARTICLES`) left out. :func:`cue`: where the predicate
starts (the first verb, auxiliary or copula; a copula soon after a noun that can be a verb;
a command's first word). :func:`value_place`: whether a name stands where a value goes.

Invariant: :func:`slots` is a pure function of the text (cached).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from memdir.upkeep.lexicon import stem
from memdir.upkeep.values import (
    ARTICLES,
    AUXILIARIES,
    COORDINATORS,
    COPULAS,
    INVERSE,
    NEGATING,
    NUMBER_WORDS,
    UNITS,
    is_verb,
    named,
    quantity,
)

__all__ = ["BE", "PREPOSITIONS", "Slot", "cue", "identity", "slots", "value_place"]

_TOKEN = re.compile(r"`[^`\n]{1,80}`|[a-z][\w+.-]*://[^\s`'\"<>)\]]*[^\s`'\"<>)\].,;:!?]"
                    r"|(?:~?/)?[\w$€£¥%µ#@]+(?:['’\-./:@+][\w$%#]+)*\+*"
                    r"|->|→|=|/|&|:(?=\s|$)")
_STOPS = frozenset(".!?:;\n")
_NOT = {"don't": ("do", "not"), "doesn't": ("does", "not"), "didn't": ("did", "not"),
        "isn't": ("is", "not"), "aren't": ("are", "not"), "wasn't": ("was", "not"),
        "weren't": ("were", "not"), "can't": ("can", "not"), "cannot": ("can", "not"),
        "won't": ("will", "not"), "shouldn't": ("should", "not"), "mustn't": ("must", "not"),
        "haven't": ("have", "not"), "hasn't": ("has", "not"), "dont": ("do", "not"),
        "wouldn't": ("would", "not"), "couldn't": ("could", "not")}
BE = "<be>"
# Pivots that make a crossing a paraphrase, not a reversal: a copula ("X is Y" / "Y is X")
# and the converses of order and place.
_DETERMINERS = frozenset("the a an all every each your our any".split())
_SPECIAL = (ARTICLES | NEGATING | COPULAS | COORDINATORS | frozenset(NUMBER_WORDS)
            | frozenset(UNITS) | frozenset(_NOT))
_NOUN_NEXT = frozenset("the a an this that these those my our your their its each every"
                       .split())
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1000000}
PREPOSITIONS = frozenset("in into to on onto at from via by under behind through".split())
# An event's verb ("I talked to Emi"): two events may both have happened. A change of
# state ("moved to", "switched to") replaces the old value all the same.
_STATE_CHANGE = frozenset("moved switched migrated changed relocated upgraded downgraded "
                          "renamed transferred".split())
_IRREGULAR_PAST = frozenset("went was were had did got saw met ran came took made said told "
                            "gave left bought ate wrote sent spent found thought felt heard "
                            "brought caught drove flew kept lost paid put read sat stood "
                            "taught won".split())
_FIRM = frozenset({BE} | {stem(w) for w in AUXILIARIES})
_IDENTIFY = frozenset(stem(w) for w in "required needed used recommended preferred supported "
                      "default target minimum maximum".split())
_IDENTIFY = frozenset(stem(w) for w in "required needed used recommended preferred supported "
                      "default target minimum maximum".split())


class Slot(NamedTuple):
    """One token of a claim (a named tuple: a store's claims make hundreds of thousands):
    ``key`` is what alignment compares; ``kind`` is ``amount``, ``name``, ``neg``, ``verb``,
    ``command`` (a sentence's first word before an article: "Apply the ..."), ``cap`` (a
    capital at a sentence's start: maybe a name) or ``word``; ``text`` the words as
    written."""

    key: str
    kind: str
    text: str
    start: bool = False  # the first slot of a sentence


@lru_cache(maxsize=65536)
def slots(claim: str) -> tuple[Slot, ...]:
    """The slots of a claim (module docstring), in order."""
    raw: list[tuple[str, bool]] = []
    end = 0
    for found in _TOKEN.finditer(claim.replace("’", "'")):
        gap = claim[end:found.start()]  # a sentence starts after its end, a line, a colon
        raw.append((found.group(), not raw or (bool(gap) and not _STOPS.isdisjoint(gap))))
        end = found.end()
    out: list[Slot] = []
    opening = False  # a sentence began since the last slot

    def add(slot: Slot) -> None:  # the first slot of each sentence is marked
        nonlocal opening
        out.append(slot._replace(start=True) if opening else slot)
        opening = False

    i = 0
    while i < len(raw):
        surface, start = raw[i]
        opening = opening or start
        low = surface.lower()
        i += 1
        if low in _NOT:
            verb, _ = _NOT[low]
            add(Slot(stem(verb), "verb", surface))
            add(Slot("not", "neg", surface))
            continue
        if low.endswith("n't"):
            add(Slot(stem(low[:-3]), "verb", surface))
            add(Slot("not", "neg", surface))
            continue
        if low.endswith("'s"):
            low, surface = low[:-2], surface[:-2]
        if low.isalpha() and low not in _SPECIAL and not (
                start and i < len(raw) and raw[i][0].lower() in _DETERMINERS):
            # A plain word (most tokens): its slot depends on it, on whether it starts a
            # sentence and on whether an article comes right before it, so it is cached.
            slot = _plain(surface, start, i > 1 and raw[i - 2][0].lower() in _NOUN_NEXT)
            out.append(slot._replace(start=True) if opening else slot)  # add(), inlined
            opening = False
            continue
        if low in ARTICLES:
            if out and out[-1].key == BE and low in ("the", "a", "an"):
                out[-1] = Slot(BE, "verb", f"{out[-1].text} {surface}")  # "is the": identity
            continue
        following = raw[i][0].lower() if i < len(raw) else ""
        if start and following in _DETERMINERS and low not in _DETERMINERS \
                and not named(surface, sentence_start=True) and quantity(low) is None:
            add(Slot(stem(low), "command", surface))  # "Apply the migration"
            continue
        while low in NUMBER_WORDS and following in _SCALES:  # "one thousand" -> 1000
            low = str(NUMBER_WORDS[low] * _SCALES[following])
            surface = f"{surface} {raw[i][0]}"
            i += 1
            following = raw[i][0].lower() if i < len(raw) else ""
        unit = raw[i][0].lower() if i < len(raw) else None
        amount = quantity(low, unit if unit in UNITS else None)
        if amount is not None:
            text = surface
            if unit in UNITS and not amount.startswith("n:"):
                text = f"{surface} {raw[i][0]}"
                i += 1
            add(Slot(amount, "amount", text))
        elif low in NEGATING:
            add(Slot("not", "neg", surface))
        elif low in COPULAS or low == ":":
            add(Slot(BE, "verb", surface))
        elif low in COORDINATORS:
            add(Slot(low, "word", surface))
        else:
            add(_plain(surface, start, i > 1 and raw[i - 2][0].lower() in _NOUN_NEXT))
    return tuple(out)


@lru_cache(maxsize=131072)
def _plain(surface: str, start: bool, after_article: bool) -> Slot:
    """The slot of a word that is no number, negation, copula or article: a name, a verb
    (not right after an article: "the queue"), a capitalised first word, or a word."""
    low = surface.lower()
    if named(surface, sentence_start=start):
        return Slot(low.strip("`"), "name", surface)
    if is_verb(low) and not after_article:
        return Slot(stem(low), "verb", surface)
    # A capital at a sentence's start may be a name ("Priya owns ...").
    return Slot(stem(low), "cap" if surface[:1].isupper() else "word", surface)


def cue(seq: tuple[Slot, ...]) -> int | None:
    """Where the predicate starts: the first verb, auxiliary or copula (a negation at the
    start is an imperative's: "Never use X")."""
    if seq and seq[0].kind in ("neg", "command"):
        return 0  # an imperative: "Never mock the clock", "Apply the migration"
    first = next((n for n, s in enumerate(seq) if s.kind == "verb"), None)
    while first is not None and first + 1 < len(seq) and seq[first + 1].kind == "verb" \
            and seq[first + 1].text.endswith("s") and not seq[first].text.endswith("s") \
            and seq[first].key not in _FIRM:
        first += 1  # "The payload index uses ...": a noun before the verb that agrees
    if first is not None and seq[first].key not in _FIRM:
        # A noun that can be a verb ("Tech lead ... is Mei", "Crash report collection in
        # the Harbor app is opt-in"): a copula or an auxiliary soon after is the predicate.
        firm = None
        for n in range(first + 1, min(len(seq), first + 9)):
            if seq[n].start:
                break  # the next sentence: "Skip X; CI does it"
            if seq[n].key in _FIRM:
                firm = n
                break
        if firm is not None:
            return firm
    if first is None and len(seq) >= 3 and seq[0].kind == "cap":
        return 0  # no verb known, a plain word first: a command ("Round prices up")
    return first


def identity(seq: tuple[Slot, ...], cue: int) -> bool:
    """Whether a copula names what its subject is for: "Postgres 15 is the production
    database", "Node 18 is required ...": the value stands before it."""
    if seq[cue].key != BE:
        return False
    return seq[cue].text.lower().endswith(" the") or (
        cue + 1 < len(seq) and seq[cue + 1].key in _IDENTIFY)


def value_place(seq: tuple[Slot, ...], at: int, cue: int | None) -> bool:
    """Whether an unknown name at ``at`` stands where a value goes: right after a
    preposition or a copula of the predicate, or before a verb whose subject is the value
    ("Priya owns ..."), and not in an account of an event ("I talked to Emi")."""
    if cue is None:
        return False
    verb = seq[cue]
    if verb.key in INVERSE or identity(seq, cue):
        return at < cue
    if at <= cue or (verb.key != BE and _past(verb.text.lower())):
        return False
    before = seq[at - 1].text.lower()
    passive = verb.key == BE and before in ("with", "using")  # "is built with Flutter"
    return seq[at - 1].key == BE or before in PREPOSITIONS or passive


def _past(word: str) -> bool:
    if word in _STATE_CHANGE:
        return False
    return word in _IRREGULAR_PAST or (word.endswith("ed") and len(word) > 4)
