"""Relative dates given their absolute date, beside the words said.

"Merge freeze after Thursday" stored on Thursday 2026-11-26 becomes "Merge freeze after
Thursday (2026-11-26)": memories are read weeks later, when "Thursday" means nothing
(seed 001), and the words stay so a reader can check the reading. docs/dates.md is the
reference for every rule; in short:

- the anchor is :func:`anchor_day`: the local date (machine time zone, ``TZ``) of the moment
  the memory is stored;
- weeks run Monday to Sunday. "next <weekday>" is that day in next week, "last <weekday>" in
  the previous week, "this <weekday>" and a weekday after on/by/after/until/till/due/from the
  nearest such day counting today, "coming <weekday>" and "before <weekday>" the nearest after
  today, "since <weekday>" and "past <weekday>" the nearest before today;
- in a clause telling of the past (:func:`memdir.core.tense.clause_tense`: "We shipped on
  Monday", "it broke after Tuesday", "On Monday we shipped"), "on/by/after/until/till/from/
  before <weekday>" is the nearest such day before today (on the same weekday a week ago:
  today would be said "today") and "this <weekday>" this week's, today included;
- a bare weekday is only a date after one of those words, or right after a verb in the past
  ("We deployed Friday" is the Friday before today), so "Thursday's standup" stays;
- a phrase is a date only where it stands as words: not joined to a path, file name, e-mail,
  identifier or option (``tomorrow.io``, ``/var/log/yesterday.log``, ``today@example.com``,
  ``--after Thursday``), and not inside code or a link target (:func:`_protected`).

Invariants:
- the text is only ever added to: the original words are kept, in their spelling;
- a phrase already followed by a date (``(2026-11-26)``, ``(December 2026)``, a bare
  ``2026-11-26``) is left alone, so running it again, from any anchor, adds nothing
  (consolidation re-runs it on old memories), and text with only absolute dates is unchanged;
- text inside code (backticks, ``` or ~~~ fences, indented blocks), URLs, e-mail addresses,
  link targets and HTML tags is never touched, and neither is a phrase joined to one of
  ``/ \\ @ = ? # . _ -`` and a word: a date is only ever added after words, never inside a name.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta

from memdir.core.tense import PAST, clause_tense, past_verb

__all__ = ["absolutize_dates", "anchor_day"]

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
FRIDAY = 4  # the end of the working week: "end of the week"
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}
_WD = "|".join(_WEEKDAYS)
_NUM = r"\d{1,3}|" + "|".join(_NUMBERS)
_UNIT = r"days?|weeks?|months?|years?"
_PART = r"morning|afternoon|evening|night"
# Already dated: followed by a date in parentheses, in the forms written here ("(2026-11-26)",
# "(2026-11-30 to 2026-12-06)", "(December 2026)", "(2027)"), or by a bare ISO date. Such a
# phrase is left alone: this is what makes a second pass add nothing. Only these exact forms
# count, so no annotation added inside other parentheses can change the verdict.
_ISO = r"\d{4}-\d{2}-\d{2}"
_DATED = (rf"(?![ \t]*(?:\((?:{_ISO}(?: to {_ISO})?|[A-Z][a-z]+ \d{{4}}|\d{{4}})\)"
          rf"|,?[ \t]*{_ISO}))")

# Joined to a name, not standing as words: a phrase right after one of / \ @ = ? # . -
# ("https://x/today", "me@today.com", "--after Thursday", "run.tomorrow"), or right before
# / \ @ = # or a . ? - that runs on into a word ("tomorrow.io", "yesterday.log",
# "today@example.com", "tomorrow?x=1", "tomorrow-ish"). "tomorrow." "tomorrow?" "tomorrow-- so"
# still end a sentence. "_" is a word character, so \b already keeps "run_today" whole.
_NOT_AFTER = r"(?<![/\\@=?#.\-])"
_NOT_BEFORE = r"(?![/\\@=#]|[.?\-]\w)"
# A plural's possessive runs on into the next word ("2 weeks' notice"): no date in the middle.
# "in 2 weeks' time" and "in a week's time" are matched whole (the in-rule) and dated after
# "time"; a quote closing the phrase ("'in 2 weeks'.") is not followed by a word and stays.
_NOT_POSSESSIVE = r"(?!['’]s\b)(?!(?<=[sS])['’][ \t]+\w)"

_RULES = re.compile(
    _NOT_AFTER + r"\b(?:"
    # Possessive ?+ : "tomorrow morning (2026-11-27)" must not match again as "tomorrow".
    rf"(?P<day>(?:the\s+)?day\s+after\s+tomorrow|(?:the\s+)?day\s+before\s+yesterday"
    rf"|(?:tomorrow|yesterday)(?:\s+(?:{_PART}))?+|today|tonight|last\s+night"
    r"|this\s+(?:morning|afternoon|evening)|end\s+of\s+(?:the\s+)?day|eod)"
    r"|end\s+of\s+(?:(?P<endrel>the|this|next|last)\s+)?(?P<endunit>week|month|year)"
    rf"|(?P<rel>this\s+coming|this\s+past|coming|past|next|this|last)\s+(?P<relwd>{_WD})"
    r"|(?P<prel>next|last|this)\s+(?P<period>weekend|week|month|year)"
    rf"|(?P<prep>on|by|after|before|until|till|from|since|due)\s+(?P<prepwd>{_WD})"
    rf"|in\s+(?P<innum>{_NUM})\s+(?P<inunit>{_UNIT})(?:['’]s?[ \t]+time)?"
    rf"|(?<![-./:\d])(?P<agonum>{_NUM})\s+(?P<agounit>{_UNIT})\s+ago"
    # a bare weekday: a date only right after a verb in the past ("we deployed Friday")
    rf"|(?P<barewd>{_WD})"
    r")\b" + _NOT_BEFORE + _NOT_POSSESSIVE + _DATED,
    re.IGNORECASE,
)
# Every rule above needs one of these lower-cased substrings (weekdays, "today", "days" and
# "yesterday" all hold "day"). Most text has none, and a substring scan is far cheaper than
# trying every alternative of _RULES at every word boundary.
_CLUES = ("day", "tomorrow", "night", "week", "month", "year", "ago", "eod", "morning",
          "afternoon", "evening")
# Spans whose words are never dates, each behind the character that any of them needs (most
# text has none, so most texts pay for no scan). See _protected.
_CODE = re.compile(  # fences (``` or ~~~, closed by as long a fence or the end), inline code
    r"(?P<fence>`{3,}|~{3,}).*?(?:(?P=fence)|\Z)|(?P<tick>`+)[^\n]*?(?<!`)(?P=tick)(?!`)",
    re.DOTALL)
_URL = re.compile(r"\b[A-Za-z][\w+.-]*://\S*")  # a URL runs to the next whitespace
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_TAG = re.compile(  # an autolink "<https://...>" (to its ">") or an HTML tag and its attributes
    r"<[A-Za-z][\w+.-]*:[^<>\n]*>|</?[A-Za-z][\w-]*(?:\s[^<>\n]*)?/?>")
_LINK = re.compile(  # a Markdown link's target: "](target" or a "[label]: target" definition
    r"\]\([ \t]*(?:<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))+)"
    r"|^[ ]{0,3}\[[^\]\n]+\]:[ \t]*\S+", re.MULTILINE)
_SCANS = (("`", _CODE), ("~~~", _CODE), ("://", _URL), ("@", _EMAIL), ("<", _TAG),
          ("](", _LINK), ("]:", _LINK))

# Weekday phrases: how far the day may be from the anchor.
_ON_OR_AFTER = "on_or_after"  # the nearest such day, today included
_AFTER = "after"  # the nearest after today
_BEFORE = "before"  # the nearest before today
_ON_OR_BEFORE = "on_or_before"  # the nearest such day, today included, looking back
_NEXT_WEEK = "next_week"  # that day in next week (Monday to Sunday)
_LAST_WEEK = "last_week"  # that day in the previous week
_WEEKDAY_RULES = {
    "on": _ON_OR_AFTER, "by": _ON_OR_AFTER, "after": _ON_OR_AFTER, "until": _ON_OR_AFTER,
    "till": _ON_OR_AFTER, "due": _ON_OR_AFTER, "from": _ON_OR_AFTER, "this": _ON_OR_AFTER,
    # "before today" cannot be meant: said on a Thursday, "before Thursday" is next week's.
    "before": _AFTER, "coming": _AFTER, "this coming": _AFTER,
    # "since today" is said "since this morning": "since Thursday" on a Thursday is last week's.
    "since": _BEFORE, "past": _BEFORE, "this past": _BEFORE,
    "next": _NEXT_WEEK, "last": _LAST_WEEK,
}
# In a clause telling of the past ("we shipped on Monday", "it broke after Tuesday"), these
# words look back: "this" to this week's day (today included), the others to the nearest
# such day before today (on the same weekday, a week ago: today is "today"). "next", "last",
# "since", "past", "coming", "due" mean the same in any tense.
_PAST_RULES = {"on": _BEFORE, "by": _BEFORE, "after": _BEFORE, "until": _BEFORE,
               "till": _BEFORE, "from": _BEFORE, "before": _BEFORE, "this": _ON_OR_BEFORE}
_WORD_BEFORE = re.compile(r"[A-Za-z]+(?:['’][a-z]+)?")
_STEP = {"next": 1, "last": -1, "this": 0, "the": 0, None: 0}


def anchor_day(moment: datetime) -> date:
    """The day relative dates count from: ``moment`` (when the memory is stored) as a date
    in the machine's local time zone (the ``TZ`` environment variable when set), the day
    the person saying "tomorrow" lives in, not the UTC day the file records."""
    return moment.astimezone().date()


def _add_months(day: date, months: int) -> date:
    month_index = day.month - 1 + months
    year = day.year + month_index // 12
    month = month_index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _shift(anchor: date, count: int, unit: str) -> date:
    unit = unit.lower().rstrip("s")
    if unit == "day":
        return anchor + timedelta(days=count)
    if unit == "week":
        return anchor + timedelta(weeks=count)
    if unit == "month":
        return _add_months(anchor, count)
    return _add_months(anchor, 12 * count)


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def _monday(anchor: date, weeks: int = 0) -> date:
    """The Monday of the anchor's week, ``weeks`` weeks on."""
    return anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=weeks)


def _weekday(anchor: date, weekday: int, rule: str) -> date:
    if rule == _ON_OR_AFTER:
        return anchor + timedelta(days=(weekday - anchor.weekday()) % 7)
    if rule == _AFTER:
        return anchor + timedelta(days=(weekday - anchor.weekday() - 1) % 7 + 1)
    if rule == _BEFORE:
        return anchor - timedelta(days=(anchor.weekday() - weekday - 1) % 7 + 1)
    if rule == _ON_OR_BEFORE:
        return anchor - timedelta(days=(anchor.weekday() - weekday) % 7)
    return _monday(anchor, 1 if rule == _NEXT_WEEK else -1) + timedelta(days=weekday)


def _last_day(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _end_of(anchor: date, unit: str, rel: str | None) -> date:
    step = _STEP[rel]
    if unit == "week":
        if step == 0:  # this week's Friday, or on a weekend the coming one
            return _weekday(anchor, FRIDAY, _ON_OR_AFTER)
        return _monday(anchor, step) + timedelta(days=FRIDAY)
    if unit == "month":
        first = _add_months(anchor.replace(day=1), step)
        return _last_day(first.year, first.month)
    return date(anchor.year + step, 12, 31)


def _period(anchor: date, period: str, rel: str) -> str:
    step = _STEP[rel]
    if period in ("week", "weekend"):
        monday = _monday(anchor, step)
        first, last = (monday, monday + timedelta(days=6)) if period == "week" else (
            monday + timedelta(days=5), monday + timedelta(days=6))
        return f"{first.isoformat()} to {last.isoformat()}"
    if period == "month":
        first = _add_months(anchor.replace(day=1), step)
        return f"{calendar.month_name[first.month]} {first.year}"
    return str(anchor.year + step)


def _day_offset(phrase: str) -> int:
    if "after tomorrow" in phrase:
        return 2
    if "before yesterday" in phrase:
        return -2
    if phrase.startswith("tomorrow"):
        return 1
    if phrase.startswith(("yesterday", "last")):
        return -1
    return 0


def _weekday_rule(word: str, match: re.Match[str]) -> str:
    """The rule of a weekday after ``word`` ("on", "this", ...): its own, or in a clause
    telling of the past, the one looking back."""
    if word in _PAST_RULES and clause_tense(match.string, *match.span()) == PAST:
        return _PAST_RULES[word]
    return _WEEKDAY_RULES[word]


def _after_past_verb(text: str, start: int) -> bool:
    """Whether the word right before ``start`` is a verb in the past ("deployed Friday")."""
    words = _WORD_BEFORE.findall(text, max(0, start - 60), start)
    return bool(words) and past_verb(words[-1], words[-2] if len(words) > 1 else "")


def _meaning(match: re.Match[str], anchor: date) -> str | None:
    """What the phrase ``match`` means, as an absolute date (or period) counted from
    ``anchor``; None: the words are no date (a bare weekday not after a verb in the past)."""
    g = match.groupdict()
    if g["barewd"]:
        if not _after_past_verb(match.string, match.start()):
            return None
        return _weekday(anchor, _WEEKDAYS.index(g["barewd"].lower()), _BEFORE).isoformat()
    if g["day"]:
        phrase = " ".join(g["day"].lower().split())
        return (anchor + timedelta(days=_day_offset(phrase))).isoformat()
    if g["endunit"]:
        rel = g["endrel"].lower() if g["endrel"] else None
        return _end_of(anchor, g["endunit"].lower(), rel).isoformat()
    if g["relwd"]:
        rule = _weekday_rule(" ".join(g["rel"].lower().split()), match)
        return _weekday(anchor, _WEEKDAYS.index(g["relwd"].lower()), rule).isoformat()
    if g["period"]:
        return _period(anchor, g["period"].lower(), g["prel"].lower())
    if g["prepwd"]:
        rule = _weekday_rule(g["prep"].lower(), match)
        return _weekday(anchor, _WEEKDAYS.index(g["prepwd"].lower()), rule).isoformat()
    if g["innum"]:
        return _shift(anchor, _number(g["innum"]), g["inunit"]).isoformat()
    return _shift(anchor, -_number(g["agonum"]), g["agounit"]).isoformat()


def _indented_code(text: str) -> list[tuple[int, int]]:
    """Markdown indented code blocks: lines indented by 4 spaces or a tab, starting at the top
    of the text or after a blank line (an indented line inside a paragraph continues it)."""
    spans: list[tuple[int, int]] = []
    start = 0
    opens = True  # at the top of the text, or after a blank line, or inside a block
    for line in text.splitlines(keepends=True):
        end = start + len(line)
        if not line.strip():
            opens = True
        elif line.startswith(("    ", "\t")) and opens:
            spans.append((start, end))
        else:
            opens = False
        start = end
    return spans


def _protected(text: str) -> list[tuple[int, int]]:
    """Sorted, disjoint (start, end) spans where no phrase is a date: code (``` and ~~~ fences,
    inline backticks, indented blocks), URLs (scheme:// to the next whitespace), e-mail
    addresses, autolinks and HTML tags, Markdown link targets."""
    spans: list[tuple[int, int]] = []
    seen: set[re.Pattern[str]] = set()
    for needle, pattern in _SCANS:
        if needle in text and pattern not in seen:
            seen.add(pattern)
            spans.extend(m.span() for m in pattern.finditer(text))
    if "    " in text or "\t" in text:
        spans.extend(_indented_code(text))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def absolutize_dates(text: str, anchor: date) -> str:
    """``text`` with each relative date phrase followed by its absolute date counted from
    ``anchor``: "after Thursday" -> "after Thursday (2026-11-26)"."""
    lowered = text.lower()
    if not any(clue in lowered for clue in _CLUES):
        return text
    spans = _protected(text)
    out: list[str] = []
    last = pos = skip = 0  # skip: the first protected span that may still lie ahead
    while match := _RULES.search(text, pos):
        start, end = match.span()
        while skip < len(spans) and spans[skip][1] <= start:
            skip += 1
        if skip < len(spans) and spans[skip][0] < end:
            # Inside code, a URL, ...: go on after it. A phrase only running into one
            # ("on\n\n    Thursday") is no date, but a shorter one inside it may be.
            pos = spans[skip][1] if spans[skip][0] <= start else start + 1
            continue
        meaning = _meaning(match, anchor)
        if meaning is None:
            pos = end
            continue
        out.append(text[last:end])
        out.append(f" ({meaning})")
        last = pos = end
    out.append(text[last:])
    return "".join(out)
