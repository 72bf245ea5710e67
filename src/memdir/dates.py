"""Relative dates made absolute: "tomorrow" -> "2026-11-22", "after Thursday" -> "after 2026-11-26".

Memories are read weeks later, when "Thursday" means nothing (seed 001). Rules:
- the anchor is the local date when the memory is stored;
- a bare weekday is only converted after a word that makes it a date ("on", "by", "after",
  "next", "last"...), so "Thursday's standup" stays as written;
- "next/this/coming <weekday>" is the next such day (never today); "last <weekday>" the
  previous one; "in N days/weeks/months" and "N days ago" count from the anchor;
- text inside backticks or code fences is never touched.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

__all__ = ["absolutize_dates"]

_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}
_WD = "|".join(_WEEKDAYS)
_NUM = r"\d{1,3}|" + "|".join(_NUMBERS)
_UNIT = r"days?|weeks?|months?|years?"

_RULES = re.compile(
    r"\b(?:"
    rf"(?P<dat>the\s+day\s+after\s+tomorrow|the\s+day\s+before\s+yesterday)"
    rf"|(?P<simple>today|tomorrow|yesterday|tonight)"
    rf"|(?P<rel>next|this|coming|last|past)\s+(?P<relwd>{_WD})"
    rf"|(?P<period_rel>next|last|this)\s+(?P<period>week|month|year)"
    rf"|(?P<prep>on|by|after|before|until|till|from|since|due)\s+(?P<prepwd>{_WD})"
    rf"|in\s+(?P<innum>{_NUM})\s+(?P<inunit>{_UNIT})"
    rf"|(?<![-./:\d])(?P<agonum>{_NUM})\s+(?P<agounit>{_UNIT})\s+ago"
    r")\b(?!'s)",
    re.IGNORECASE,
)
# Every rule above needs one of these lower-cased substrings (weekdays, "today", "days" and
# "yesterday" all hold "day"). Most text has none, and a substring scan is far cheaper than
# trying every alternative of _RULES at every word boundary.
_CLUES = ("day", "tomorrow", "tonight", "week", "month", "year", "ago")
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)


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


def _next_weekday(anchor: date, weekday: int) -> date:
    return anchor + timedelta(days=(weekday - anchor.weekday() - 1) % 7 + 1)


def _prev_weekday(anchor: date, weekday: int) -> date:
    return anchor - timedelta(days=(anchor.weekday() - weekday - 1) % 7 + 1)


def _replace(match: re.Match[str], anchor: date) -> str:
    g = match.groupdict()
    if g["dat"]:
        delta = 2 if "after" in g["dat"].lower() else -2
        return (anchor + timedelta(days=delta)).isoformat()
    if g["simple"]:
        word = g["simple"].lower()
        delta = {"today": 0, "tonight": 0, "tomorrow": 1, "yesterday": -1}[word]
        text = (anchor + timedelta(days=delta)).isoformat()
        return f"{text} (night)" if word == "tonight" else text
    if g["relwd"]:
        wd = _WEEKDAYS.index(g["relwd"].lower())
        past = g["rel"].lower() in ("last", "past")
        day = _prev_weekday(anchor, wd) if past else _next_weekday(anchor, wd)
        return day.isoformat()
    if g["period"]:
        period, rel = g["period"].lower(), g["period_rel"].lower()
        step = {"next": 1, "last": -1, "this": 0}[rel]
        if period == "week":
            monday = anchor - timedelta(days=anchor.weekday()) + timedelta(weeks=step)
            return f"the week of {monday.isoformat()}"
        if period == "month":
            first = _add_months(anchor.replace(day=1), step)
            return f"{calendar.month_name[first.month]} {first.year}"
        return str(anchor.year + step)
    if g["prepwd"]:
        wd = _WEEKDAYS.index(g["prepwd"].lower())
        past = g["prep"].lower() == "since"
        day = _prev_weekday(anchor, wd) if past else _next_weekday(anchor, wd)
        return f"{g['prep']} {day.isoformat()}"
    if g["innum"]:
        return f"on {_shift(anchor, _number(g['innum']), g['inunit']).isoformat()}"
    return f"on {_shift(anchor, -_number(g['agonum']), g['agounit']).isoformat()}"


def absolutize_dates(text: str, anchor: date) -> str:
    """Replace relative date phrases in ``text`` with absolute dates counted from ``anchor``."""
    lowered = text.lower()
    if not any(clue in lowered for clue in _CLUES):
        return text
    out: list[str] = []
    last = 0
    for code in _CODE.finditer(text):
        out.append(_RULES.sub(lambda m: _replace(m, anchor), text[last : code.start()]))
        out.append(code.group(0))
        last = code.end()
    out.append(_RULES.sub(lambda m: _replace(m, anchor), text[last:]))
    return "".join(out)
