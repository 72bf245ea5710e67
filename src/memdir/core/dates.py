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
- a bare weekday is only a date after one of those words, so "Thursday's standup" stays.

Invariants:
- the text is only ever added to: the original words are kept, in their spelling;
- a phrase already followed by a date (``(2026-11-26)``, ``(December 2026)``, a bare
  ``2026-11-26``) is left alone, so running it again, from any anchor, adds nothing
  (consolidation re-runs it on old memories), and text with only absolute dates is unchanged;
- text inside backticks or code fences is never touched.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta

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

_RULES = re.compile(
    r"\b(?:"
    # Possessive ?+ : "tomorrow morning (2026-11-27)" must not match again as "tomorrow".
    rf"(?P<day>(?:the\s+)?day\s+after\s+tomorrow|(?:the\s+)?day\s+before\s+yesterday"
    rf"|(?:tomorrow|yesterday)(?:\s+(?:{_PART}))?+|today|tonight|last\s+night"
    r"|this\s+(?:morning|afternoon|evening)|end\s+of\s+(?:the\s+)?day|eod)"
    r"|end\s+of\s+(?:(?P<endrel>the|this|next|last)\s+)?(?P<endunit>week|month|year)"
    rf"|(?P<rel>this\s+coming|this\s+past|coming|past|next|this|last)\s+(?P<relwd>{_WD})"
    r"|(?P<prel>next|last|this)\s+(?P<period>weekend|week|month|year)"
    rf"|(?P<prep>on|by|after|before|until|till|from|since|due)\s+(?P<prepwd>{_WD})"
    rf"|in\s+(?P<innum>{_NUM})\s+(?P<inunit>{_UNIT})"
    rf"|(?<![-./:\d])(?P<agonum>{_NUM})\s+(?P<agounit>{_UNIT})\s+ago"
    r")\b(?!['’]s\b)" + _DATED,
    re.IGNORECASE,
)
# Every rule above needs one of these lower-cased substrings (weekdays, "today", "days" and
# "yesterday" all hold "day"). Most text has none, and a substring scan is far cheaper than
# trying every alternative of _RULES at every word boundary.
_CLUES = ("day", "tomorrow", "night", "week", "month", "year", "ago", "eod", "morning",
          "afternoon", "evening")
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)

# Weekday phrases: how far the day may be from the anchor.
_ON_OR_AFTER = "on_or_after"  # the nearest such day, today included
_AFTER = "after"  # the nearest after today
_BEFORE = "before"  # the nearest before today
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


def _meaning(match: re.Match[str], anchor: date) -> str:
    """What the phrase ``match`` means, as an absolute date (or period) counted from ``anchor``."""
    g = match.groupdict()
    if g["day"]:
        phrase = " ".join(g["day"].lower().split())
        return (anchor + timedelta(days=_day_offset(phrase))).isoformat()
    if g["endunit"]:
        rel = g["endrel"].lower() if g["endrel"] else None
        return _end_of(anchor, g["endunit"].lower(), rel).isoformat()
    if g["relwd"]:
        rule = _WEEKDAY_RULES[" ".join(g["rel"].lower().split())]
        return _weekday(anchor, _WEEKDAYS.index(g["relwd"].lower()), rule).isoformat()
    if g["period"]:
        return _period(anchor, g["period"].lower(), g["prel"].lower())
    if g["prepwd"]:
        rule = _WEEKDAY_RULES[g["prep"].lower()]
        return _weekday(anchor, _WEEKDAYS.index(g["prepwd"].lower()), rule).isoformat()
    if g["innum"]:
        return _shift(anchor, _number(g["innum"]), g["inunit"]).isoformat()
    return _shift(anchor, -_number(g["agonum"]), g["agounit"]).isoformat()


def _annotate(text: str, anchor: date) -> str:
    return _RULES.sub(lambda m: f"{m.group(0)} ({_meaning(m, anchor)})", text)


def absolutize_dates(text: str, anchor: date) -> str:
    """``text`` with each relative date phrase followed by its absolute date counted from
    ``anchor``: "after Thursday" -> "after Thursday (2026-11-26)"."""
    lowered = text.lower()
    if not any(clue in lowered for clue in _CLUES):
        return text
    out: list[str] = []
    last = 0
    for code in _CODE.finditer(text):
        out.append(_annotate(text[last : code.start()], anchor))
        out.append(code.group(0))
        last = code.end()
    out.append(_annotate(text[last:], anchor))
    return "".join(out)
