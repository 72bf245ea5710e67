"""Rule-based memory extraction from user messages: no LLM, no cost (DESIGN §6, seed 002).

Triggers are regular expressions over one clause of the user's own prose: preferences ("I
prefer X", "always/never use X", "use X instead of Y", "please don't use X", "I'd rather X"),
corrections ("actually X", "no, X", "not X but Y", "it's X, not Y", "that's wrong, X") and
constraints ("must X", "X is required", "don't ever X", "we can't X", "X is not allowed").

Invariants:

- Precision before recall: a wrong memory is injected into every later session. Code blocks,
  blockquotes and pasted tool output are dropped; inline code, quotations and URLs are masked
  for matching (kept in the content). Questions, hypotheticals, conditionals, reported speech,
  negated or hedged triggers, instructions for the task at hand and fragments yield nothing.
- A message holding anything secret-looking yields nothing (splitting could separate a secret
  from the words that make it recognisable); ``<private>`` spans are removed first.
- One candidate per clause (constraint > preference > correction) and per (kind, content) per
  message. ``content`` is at most 100 characters, cut only at a clause boundary, never
  mid-word nor before a restriction ("unless"), else skipped; ``excerpt`` at most 300.
- Pure and stdlib only: the result depends on the text and the taxonomy alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from memdir.capture.prose import prose_lines, sentences
from memdir.core.safety import find_secrets, strip_private
from memdir.core.taxonomy import Taxonomy

__all__ = ["RELEVANCE", "Candidate", "RuleKind", "extract_rules", "rule_type"]

RuleKind = Literal["preference", "correction", "constraint"]

RELEVANCE: dict[RuleKind, float] = {"preference": 0.7, "correction": 0.8, "constraint": 0.9}
MAX_CONTENT = 100
MAX_EXCERPT = 300
_MAX_CLAUSE = 1000

# The first name each preset knows, so every preset files a kind under its nearest type.
_TYPE_CHOICES: dict[RuleKind, tuple[str, ...]] = {
    "preference": ("preference", "preferences", "user", "feedback"),
    "correction": ("feedback", "fact", "pattern", "principles", "preferences"),
    "constraint": ("policy", "principles", "pattern", "feedback", "decision"),
}


@dataclass(frozen=True)
class Candidate:
    kind: RuleKind
    type: str
    content: str
    relevance: float
    excerpt: str
    message_index: int = -1


def rule_type(kind: RuleKind, taxonomy: Taxonomy) -> str | None:
    """The taxonomy's type for a kind, or None when it knows none of the candidates."""
    specs = (taxonomy.lookup(name) for name in _TYPE_CHOICES[kind])
    return next((spec.name for spec in specs if spec is not None), None)


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)  # triggers are matched case-insensitively


# -- triggers ----------------------------------------------------------------------------------
_START = r"(?:^|[,:;]\s*|\b(?:please|pls|and|also|so|but|just|then)\s+)"
_NOT_AFTER_ALWAYS = (
    r"been|was|were|had|has|have|is|are|did|does|do|got|gets|get|seen|mind|knew|know|heard|"
    r"thought|understood|works|happens|fail|fails|forget|forgets|forgot|break|breaks|broke|crash|"
    r"crashes|seem|seems|end|ends|feel|felt|wonder|found|find|want|say|says|said|again|directly|"
    r"really|actually|quite|fully|once|anymore|before|yet|even|too|the|a|an|so|that|this|it|there|"
    r"would|could|should|will|can|may|must"
)
_CONSTRAINTS = [_rx(p) for p in (
    r"\b(?:don't|do not|dont)\s+ever\s+\w", r"\bnever,?\s+ever\b", r"\bunder no circumstances\b",
    r"\b(?:no one|nobody)\s+(?:is allowed to|may|can|should|gets to)\s+\w",
    r"^(?:nothing|no code|no module)\b[^,;]{1,40}?\s+(?:may|is allowed to|should ever)\s+\w",
    r"(?<!\bit\s)(?<!\bthat\s)(?<!\bthis\s)(?<!\bthere\s)(?<!\bhe\s)(?<!\bshe\s)(?<!\bi\s)"
    r"(?<!\bwhich\s)(?<!\bwho\s)(?<=\S\s)\bmust(?:n't| not| never| always| only| still)?\s+"
    # epistemic "must": "must have crashed", "must still be", "must be failing", "must be right"
    r"(?!have\s+(?:been|\w+ed|\w+en)\b|still\s+be\b|be\s+\w+ing\b|be\s+(?:right|wrong|"
    r"kidding|joking|confused|mistaken|it|that|the (?:reason|cause|problem|issue))\b)\w",
    r"\b(?:is|are|be|'s|'re)\s+(?:always\s+|strictly\s+|absolutely\s+)?"
    r"(?:required|mandatory|compulsory|non-negotiable|a must)\b",
    r"\b(?:is|are|'s|'re)\s+(?:strictly\s+|absolutely\s+)?(?:(?:not|never)\s+(?:allowed|"
    r"permitted)|forbidden|prohibited|banned|off[- ]limits)\b",
    r"\b(?:isn't|aren't)\s+(?:allowed|permitted)\b",
    # "we can't use X", not "we can't reproduce it"
    r"\b(?:we|you)\s+(?:can't|cannot|can not|can never|may not|mustn't)\s+(?:ever\s+)?(?:use|"
    r"ship|depend|add|import|deploy|push|commit|merge|release|store|log|expose|call|break|rely|"
    r"install|upgrade|drop|include|send|touch|change|remove|delete|publish|hardcode|vendor|leak|"
    r"introduce|bypass|upload|share)\b",
    r"\b(?:every|all|each|any)\s+[\w\s`/.-]{1,40}?\s+(?:has to|have to|needs to|need to)\s+\w",
)]
_PREFERENCES = [_rx(p) for p in (
    r"\b(?:i|we)(?:'d| would)?\s+(?:(?:really|strongly|generally|usually|much|definitely|"
    r"personally|always|still|do|also)\s+)*prefer\s+\w",
    _START + r"prefer\s+\w", r"\bmy (?:strong |personal |general )?preference is\b",
    r"\b(?:i|we)(?:'d| would)\s+(?:much\s+|really\s+|definitely\s+)?rather\s+"
    r"(?!not\s*(?:[,.!]|$))\w",
    # Without a comparator, "I like X better" picks among this chat's options.
    r"\b(?:i|we)\s+(?:really\s+|much\s+|definitely\s+)?like\s+.{2,60}?\s+(?:better|more)\s+"
    r"(?:than|over)\s+\w",
    r"\b(?:i|we)\s+(?:really\s+|much\s+)?like\s+it\s+(?:better|more|best)\s+when\s+\w",
    # An imperative or a first-person habit, not "the deploy always fails".
    r"(?:^|[,:;]\s*|\b(?:please|pls|and|also|so|but|just|we|i|should|(?<!used )to|let's|"
    rf"you should)\s+)(?:always|never)\s+(?!(?:{_NOT_AFTER_ALWAYS})\b)(?![a-z]+ed\b)\w",
    _START + r"(?:don't|do not|dont)\s+(?:use|import|add|mock|hardcode|hard-code|rely on|"
    r"introduce|write|put|pull in|reach for|commit|create|leave|reformat)\b",
    _START + r"(?:avoid|stop (?:using|adding|writing|putting|importing|mocking|creating|"
    r"leaving))\s+\w",
    r"(?:^|[,:;]\s*|\b(?:please|pls|and|also|so|but|just|we|i|always|should)\s+)(?:use|using|"
    r"write|pick|choose|go with|stick (?:to|with)|return|raise|keep)\s+[^,;]{1,60}?\s+"
    r"(?:instead of|rather than)\s+\w",
    _START + r"stick\s+(?:to|with)\s+\w",
    _START + r"(?:use|prefer|write|keep|put|name|format|prefix|pin|wrap|log)\s+.+\b(?:everywhere|"
    r"across the (?:codebase|repo|project)|in (?:this|the|our) (?:repo|repository|codebase|"
    r"project)|throughout the (?:codebase|project|repo)|for (?:all|every|any) new)\b",
)]
_TRIGGERS: tuple[tuple[RuleKind, list[re.Pattern[str]]], ...] = (
    ("constraint", _CONSTRAINTS), ("preference", _PREFERENCES))
_DURABLE = r"(?:from now on|going forward|moving forward|in (?:the )?future|from here on(?: out)?)"
_CORRECTION_MARK = (
    r"(?:actually|(?:no|nope|nah|wrong|incorrect|not quite)(?=\s*[,:;!.—–-])|"
    r"(?:that|this|it)(?:'s| is| was)\s+(?:wrong|incorrect|not (?:right|correct|true|accurate|"
    r"quite right)|not how (?:it|this|that) works(?: here)?)|you(?:'re| are) wrong|correction"
    r"(?=\s*:))"
)
_LEAD = _rx(
    r"^(?:(?:(?:ok(?:ay)?|oh|hmm|well|right|yes|yeah|yep|sure|alright|hey|so|and|but|also|plus|"
    r"btw|by the way|fyi|fwiw|imo|imho|tbh|honestly|one more thing|another thing|reminder|note|"
    r"important|just so you know|for the record|again|anyway|in general|additionally|finally|"
    r"lastly|please|pls|plz|though|remember to|make sure (?:to|you|that)|be sure to|"
    + _DURABLE + r")\b|" + _CORRECTION_MARK + r")[\s,:;!.—–-]*)+"
)
_MARKED = _rx(r"^(?:(?:ok(?:ay)?|oh|hmm|well)\b[\s,]*)?" + _CORRECTION_MARK)
_BARE_CORRECTION = _rx(r"^" + _CORRECTION_MARK + r"[.!]*$")  # "No." - the next clause corrects
_CONTRAST = _rx(
    r"\b(?:is|are|was|were|'s|'re|be|use|uses|using|run|runs|lives?|goes|go|means|called|named|"
    r"written|stored|kept|set|talks|owns)\s+[^,;]{1,60},\s+(?:not|never)\s+(?!only\b|just\b|yet\b|"
    r"now\b|sure\b|necessarily\b|always\b|everything\b|even\b|really\b|that\b|too\b|ever\b)\w"
    r"|(?:^|[\s,])not\s+(?!only\b|just\b|merely\b|simply\b|sure\b|yet\b|now\b|really\b|"
    r"necessarily\b|that\b|quite\b|exactly\b|even\b|always\b|all\b|to\b|because\b|much\b|so\b)"
    r"[^,;]{1,60}?,?\s+but\s+(?!also\b)\w"
)

# -- what disqualifies a trigger ---------------------------------------------------------------
_QUESTION_START = _rx(r"^(?:should|shall|do(?!\s+not\b)|does|did|is|are|was|were|can|could|would|"
                      r"will|what|why|how|which|where|who|whose|isn't|aren't|doesn't|didn't|won't|"
                      r"wouldn't|shouldn't|couldn't|am|any idea)\b")
# Anywhere in a clause, these make it no rule: hypotheticals; hedges, evidentials and bug-report
# framing (the user is guessing or describing); and words tying it to the task at hand.
_NOT_A_RULE = _rx(
    r"\b(?:what if|suppose|supposing|imagine|hypothetically|in theory|would it|wouldn't it|would "
    r"that|could we|should we|shall we|do you think|i think|i thought|i guess|i believe|i suppose|"
    r"i feel like|maybe|perhaps|probably|possibly|might|not sure|kind of|sort of|i wonder|"
    r"wondering|looks like|seems? like|it seems|apparently|turns? out|i'm asking|just asking|"
    r"asking about|the (?:issue|problem|bug) (?:is|was)|for the (?:moment|time being)|this time|"
    r"this once|temporarily|today|tonight|tomorrow|yet|never ?mind|hold on|let me|let's (?:just|"
    r"try|see|go|do|run|first|start|check|look|get|not)|go ahead|(?:that|it)'s (?:fine|ok)|looks "
    r"good|lgtm|got it|i see|makes sense|i meant|i mean|try (?:it|that|this)|(?:try|do|run)(?: it|"
    r" that| this)? again|for (?:this|that) (?:one|run|task|pr|change|commit|file|test|function|"
    r"ticket|branch|demo|experiment|step|case)|(?:this|the current) (?:task|pr|ticket|session|"
    r"run)|current (?:task|change|pr|branch|implementation|approach|one)|the (?:former|latter)|"
    r"(?:first|second|third|last|other) (?:option|version|variant|suggestion|approach)|you "
    r"(?:listed|showed|suggested|proposed|gave))\b"
    r"|(?<!from )\bnow\b(?! on\b| that\b)|^wait\b|\bwait[,.!]|\bwait$"
)
_CONDITIONAL = _rx(r"\b(?:if|unless|in case|assuming|provided that|as long as|once)\b")
# Inside a purpose or reason clause ("set up so that X is not allowed") a trigger is not the
# point of the sentence; after its comma ("Because X, we must Y") it is.
_SUBORDINATE = _rx(r"\b(?:so that|because|since)\b[^,;]*$")
_REPORTED = _rx(
    r"(?:\b([\w']+)\s+(?:\w+ly\s+)?(?:said|says|say|claims?|claimed|thinks|thought|suggests?|"
    r"suggested|recommends?|recommended|told|tells|mentions?|mentioned|argues?|argued|insists?|"
    r"insisted|writes|wrote|states|stated|warns?|warned|believes|reckons|wants|wanted|asks|asked|"
    r"keeps saying)\b)|\baccording to\b|\bper the\b"
)
_NEGATION = _rx(r"\bnot\b|n't\b|\bno longer\b|\bno need\b|\bhardly\b|\brarely\b|\bseldom\b|"
                r"\bwithout\b|\bused to\b|\bcannot\b")
_VAGUE = set("it it's that that's this these those they they're he she them which".split())
_IMPERSONAL = _rx(r"^(?:it|that)(?:'s| is)\s+(?:mandatory|required|forbidden|not allowed)\s+to\b")
_PERSONAL = set("i i'll i'm i've you you'll we'll".split())
_CONTRAST_OK = set("use call import name write put keep run it's they're not".split())
# "No, it's PostgreSQL 15": after a correction marker, "it's" + a name is a fact, not a shrug.
_NAMED = re.compile(r"^(?:it's|it is|they're|they are)\s+(?:[A-Z0-9`]|v\d)")
# A correction must be a lasting statement: a subject and a finite verb, about the project, not
# about this conversation's files, bugs or the agent's last answer.
_NOT_SUBJECT = set(
    "let's let try run go do just wait hold stop continue keep revert undo show print check look "
    "fix give make put move rename delete remove add open close commit push start restart redo "
    "retry skip ignore leave change update write read see use focus forget sorry ok okay sure yes "
    "yeah thanks not no but".split())
_FINITE = _rx(r"\b(?:is|are|was|were|isn't|aren't|has|have|should|must|will|can|can't|does|"
              r"doesn't|don't|only)\b|'s\b|'re\b|\b(?:we|they)\s+\w+|\w{3,}s\b")
_NOISE = _rx(r"\b(?:you|your|you're|i|i'm|i'd|i'll|i've|me|problem|issue|bug|error|errors|typo|"
             r"fail\w*|crash\w*|flaky|broken|broke|works|worked|working|fixed|wrong|mistake|"
             r"the other|above|below|earlier|previous|last one|that one|this one|anyway|still|"
             r"output)\b")
_DEICTIC = _rx(r"(?:it|them|that|this|these|those)(?:\s+\w+)?(?:\s*(?:[,.;!]|$)|"
               r"\s+(?:for|in|on|at|with|to|from|again|anymore|here)\b)")
_LIGHT_VERB = _rx(r"(?:use|do|run|call|touch|change|try|put|add|make|say|write|edit|import)\s+")
_WORD = re.compile(r"[\w'`./-]+")


def _deictic(body: str, end: int) -> bool:
    """Whether a trigger's object is one only this conversation can resolve ("use that one")."""
    # A match ends on the first letter of a verb ("always u") or object ("prefer t"), or after it.
    mid_word = body[end - 1:end].isalnum() and body[end:end + 1].isalnum()
    rest = body[end - 1 if mid_word else end:].lstrip()
    verb = _LIGHT_VERB.match(rest)
    return bool(_DEICTIC.match(rest) or (verb and _DEICTIC.match(rest, verb.end())))


def _blocked(body: str, start: int, negation: bool = True) -> bool:
    """Whether what precedes a trigger makes it conditional, reported or (if asked) negated."""
    before = body[:start]
    if _CONDITIONAL.search(before) or _SUBORDINATE.search(before):
        return True
    if any((m.group(1) or "").lower() not in {"i", "we", "i've", "we've"}
           for m in _REPORTED.finditer(before)):
        return True  # someone else said it
    clause = re.split(r"[,;:]", before)[-1]
    return negation and bool(_NEGATION.search(" ".join(clause.split()[-3:])))


# -- content -----------------------------------------------------------------------------------
# Where a clause may be cut: before a reason, an example or an aside, never before a restriction
# ("unless", "except", "but"), whose loss would make the memory a stronger rule than was said.
_BOUNDARY = _rx(r",?\s+(?:because|since|so that|otherwise)\b|,\s+(?:so|and|especially|e\.g\.|"
                r"i\.e\.|which)\b|\s+[—–-]{1,2}\s+|\s+\(|;\s")
_RESTRICTION = _rx(r"\W*(?:\w+\W+)?(?:unless|except|only|but|when|if|outside|apart|other than|"
                   r"excluding|not in)\b")
_TRAILING = _rx(r"(?:[\s,;:.!…—–-]+|[\s,;:.!…—–-]*\b(?:please|pls|plz|thanks(?: a lot)?|"
                r"thank you|thx|ty|cheers|ok|okay)\b|\s*[:;]-?[)(DP])+$")
_LABEL = re.compile(r"^[^:,]{1,40}:\s+")


def _clean(text: str) -> str:
    text = " ".join(_TRAILING.sub("", text).split())
    return text[:1].upper() + text[1:] if text[:1].isalpha() else text


def _content(original: str, masked: str, end: int, vague_ok: bool = False) -> str | None:
    """The memory text for a trigger ending at ``end`` of a body, or None if it can't be one."""
    label = _LABEL.match(masked)  # "Two things: always use X" -> "Always use X"
    if label and label.end() <= end and len(label.group(0).split()) <= 4:
        original, masked, end = original[label.end():], masked[label.end():], end - label.end()
    cuts = [len(original)] + [m.start() for m in _BOUNDARY.finditer(masked)
                              if m.start() >= end and not _RESTRICTION.match(masked[m.end():])]
    # The longest cut that fits; a shorter one would only lose words.
    texts = (_clean(original[:cut]) for cut in sorted(set(cuts), reverse=True))
    text = next((t for t in texts if len(t) <= MAX_CONTENT), "")
    words = _WORD.findall(text)
    thin = len(words) < 3 or len(text) < 10 or text.count("`") % 2 == 1
    return None if thin or (not vague_ok and words[0].lower() in _VAGUE) else text


def _clause(original: str, masked: str, after_bare: bool) -> tuple[RuleKind, str] | None:
    # A longer clause is pasted text, not one rule (and checking it would take quadratic time).
    if (len(original) > _MAX_CLAUSE or len(_WORD.findall(masked)) < 3
            or original.rstrip(" )\"'").endswith("?")):
        return None
    lead = _LEAD.match(masked)
    at = lead.end() if lead else 0
    body, text = masked[at:], original[at:]
    if not body or _QUESTION_START.match(body) or _NOT_A_RULE.search(masked):
        return None
    first = (_WORD.findall(body) or [""])[0].lower()
    for kind, patterns in _TRIGGERS:
        for pattern in patterns:
            for match in pattern.finditer(body):
                if _blocked(body, match.start()) or _deictic(body, match.end()):
                    continue
                # A vague subject ("it must be…") fails in _content, after a "Label:" is dropped.
                content = _content(text, body, match.end(), bool(_IMPERSONAL.match(body)))
                if content:
                    return kind, content
    if lead and re.search(_DURABLE, lead.group(0), re.I) and first not in _VAGUE | _PERSONAL:
        content = _content(text, body, 0)  # "From now on, run ruff before…"
        return ("preference", content) if content else None
    return _correction(text, body, first, after_bare or bool(_MARKED.match(masked)))


def _correction(text: str, body: str, first: str, marked: bool) -> tuple[RuleKind, str] | None:
    contrast = _CONTRAST.search(body)
    if not (marked or contrast) or _NOISE.search(body) or len(_WORD.findall(body)) < 3:
        return None
    if contrast:
        if (_blocked(body, contrast.start(), negation=False)
                or first in (_VAGUE | _NOT_SUBJECT) - _CONTRAST_OK):
            return None
    elif (first in _NOT_SUBJECT or (first in _VAGUE and not _NAMED.match(text))
          or not _FINITE.search(body) or _blocked(body, len(body), negation=False)):
        return None
    # "It's pnpm, not npm": with a contrast, the vague subject is the correction's whole point.
    content = _content(text, body, contrast.end() if contrast else 0,
                       bool(contrast or _NAMED.match(text)))
    return ("correction", content) if content else None


def _excerpt(sentence: str) -> str:
    sentence = " ".join(sentence.split())
    cut = sentence[:MAX_EXCERPT - 1].rsplit(" ", 1)[0] + "…"
    return sentence if len(sentence) <= MAX_EXCERPT else cut


def extract_rules(text: str, taxonomy: Taxonomy, *, message_index: int = -1) -> list[Candidate]:
    """Candidates from one user message. Precision first."""
    text = strip_private(text)
    if not text.strip() or find_secrets([text]):
        return []
    out: list[Candidate] = []
    seen: set[tuple[str, str]] = set()
    after_bare = False  # the previous clause was a bare "No." / "That's wrong."
    for line, masked_line in prose_lines(text):
        for sentence, masked in sentences(line, masked_line):
            found = _clause(sentence, masked, after_bare)
            after_bare = bool(_BARE_CORRECTION.match(masked))
            if found is None:
                continue
            kind, content = found
            type_name = rule_type(kind, taxonomy)
            if type_name is None or (kind, content.lower()) in seen:
                continue
            seen.add((kind, content.lower()))
            out.append(Candidate(kind, type_name, content, RELEVANCE[kind], _excerpt(sentence),
                                 message_index))
    return out
