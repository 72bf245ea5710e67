"""Whether a clause tells of the past: the tense :mod:`memdir.core.dates` reads a weekday in.

"We shipped on Monday" said on a Thursday means the Monday before; "we ship on Monday" and
"we will ship on Monday" mean the next one. :func:`clause_tense` reads the words around a
date phrase, within its clause (up to a sentence end, ``;``, ``:``, ``,`` or a conjunction
such as "and", "but", "when", "after"), nearest first: first back from the phrase, then,
if nothing there decides, on from it ("On Monday we shipped the fix"). A word decides:

- the past: a verb in the past tense, "shipped", "deployed", "broke", "was", "went" (a word
  ending in "-ed" counts when it acts as a verb: followed by the phrase, an object or a
  particle, "deployed the fix", "rolled back"; not an adjective before a noun, "automated
  backups"; not a participle after "be", "is", "will", "get": "will be deployed");
- the future: "will", "'ll", "shall", "going", "gonna", "should", "must", "can", "is", "are",
  "be", and the words that set a date ahead even in the past tense: "planned", "scheduled",
  "decided", "agreed", "postponed", "moved", "asked", "told", "wanted", "needed", ...

No deciding word (an imperative, "ship on Monday"; a bare present, "we ship on Monday")
leaves the phrase to its own rule, which reads a weekday as a plan.
"""

from __future__ import annotations

import re

__all__ = ["FUTURE", "PAST", "clause_tense", "past_verb"]

PAST, FUTURE = "past", "future"

_WORD = re.compile(r"[A-Za-z]+(?:['’][a-z]+)?|\d[\w.]*")
# Where a clause ends: a sentence's or clause's punctuation, a line break, or a conjunction.
_BOUNDARY = re.compile(
    r"[.!?;:\n]|,\s|\b(?:and|but|or|so|then|because|while|when|whereas|although|though|if|"
    r"unless|once|after|before|since|until|till)\b", re.IGNORECASE)
# Phrases themselves start with some of those words ("after Thursday", "until Friday"): the
# caller passes the phrase's span, which is never a boundary.
_FUTURE_WORDS = frozenset("""
will 'll shall won't wont going gonna would 'd should must can could may might let's lets
please is are am be isn't aren't it's 's next upcoming coming plan plans planning planned
schedule schedules scheduled expect expects expected due supposed slated intend intends
intended want wants wanted need needs needed hope hopes hoped decided agreed promised asked
told said moved postponed delayed pushed deferred rescheduled booked required arranged meant
""".split())
# Irregular past forms that are not also present forms ("set", "put", "read" are both).
_IRREGULAR_PAST = frozenset("""
was were had did went broke began came ran saw found made took got wrote sent built left met
paid said thought fell froze lost spent stood struck threw woke won drove chose forgot gave
grew knew led rode rose sold shook shot slept spoke stole stuck taught understood wore blew
bought brought caught dealt drew fed felt flew fought held hid hung kept laid lent meant
overtook sank sprang swam swung tore undid withdrew wound crashed
""".split())
# Words ending in "-ed" that are no past tense.
_NOT_PAST_ED = frozenset("""
need feed speed seed shed bed red bred breed weed greed embed shred hundred sacred naked
wicked kindred indeed steed reed deed heed creed proceed exceed succeed
""".split())
# What may follow a verb in the past before its date: an object, a particle, a preposition.
_AFTER_VERB = frozenset("""
the a an it them this that these those our their his her my your its us him me to in at into
onto out up down back over off from for with all both some everything nothing again
""".split())
# A participle after these is the present or future passive: "will be deployed on Friday".
_BEFORE_PARTICIPLE = frozenset("be is are am being get gets getting will 'll".split())


def _norm(word: str) -> str:
    word = word.lower().replace("’", "'")
    return word[word.index("'"):] if word.endswith(("'ll", "'d", "'s")) and word not in (
        "let's", "it's", "won't", "isn't", "aren't") else word


def past_verb(word: str, before: str = "", after: str = "") -> bool:
    """Whether ``word`` (between the words ``before`` and ``after``; "" for the phrase or
    none) is a verb in the past tense that a date after it belongs to."""
    word, before, after = _norm(word), _norm(before), _norm(after)
    if word in _FUTURE_WORDS:
        return False
    if word in _IRREGULAR_PAST:
        return True
    if len(word) < 5 or not word.endswith("ed") or word in _NOT_PAST_ED:
        return False
    if before in _BEFORE_PARTICIPLE:
        return False  # "is deployed", "will be shipped": not the past
    # A verb: followed by the date itself, an object or a particle, not by a noun it
    # describes ("automated backups run on Sunday").
    return not after or after in _AFTER_VERB or any(c.isdigit() for c in after)


def _decide(words: list[str], at: int, before: str, after: str) -> str | None:
    word = _norm(words[at])
    if word in _FUTURE_WORDS:
        return FUTURE
    if past_verb(words[at], before, after):
        return PAST
    if word.endswith("ed") and _norm(before) in _BEFORE_PARTICIPLE:
        return FUTURE  # "will be deployed", "is scheduled"
    return None


def clause_tense(text: str, start: int, end: int) -> str | None:
    """The tense the clause around ``text[start:end]`` (a date phrase) tells it in: PAST,
    FUTURE, or None when no word decides."""
    left = max((m.end() for m in _BOUNDARY.finditer(text, max(0, start - 200), start)),
               default=max(0, start - 200))
    ahead = _BOUNDARY.search(text, end, end + 200)
    right = ahead.start() if ahead else min(len(text), end + 200)
    back = _WORD.findall(text, left, start)
    for at in range(len(back) - 1, -1, -1):
        tense = _decide(back, at, back[at - 1] if at else "",
                        back[at + 1] if at + 1 < len(back) else "")
        if tense:
            return tense
    on = _WORD.findall(text, end, right)
    for at in range(len(on)):
        tense = _decide(on, at, on[at - 1] if at else "", on[at + 1] if at + 1 < len(on) else "")
        if tense:
            return tense
    return None
