"""Relative dates become absolute against the day a memory is stored."""

from __future__ import annotations

from datetime import date

import pytest

from memdir.dates import absolutize_dates

MONDAY = date(2026, 3, 2)
SATURDAY = date(2026, 11, 21)


@pytest.mark.parametrize(("text", "anchor", "expected"), [
    ("Merge freeze after Thursday", MONDAY, "Merge freeze after 2026-03-05"),
    ("ship tomorrow", SATURDAY, "ship 2026-11-22"),
    ("broke yesterday", SATURDAY, "broke 2026-11-20"),
    ("done today", SATURDAY, "done 2026-11-21"),
    ("demo next Thursday", SATURDAY, "demo 2026-11-26"),
    ("demo this Monday", MONDAY, "demo 2026-03-09"),
    ("outage last Friday", MONDAY, "outage 2026-02-27"),
    ("review in 2 weeks", SATURDAY, "review on 2026-12-05"),
    ("review in two days", SATURDAY, "review on 2026-11-23"),
    ("renew in 3 months", date(2026, 11, 30), "renew on 2027-02-28"),
    ("migrated 10 days ago", SATURDAY, "migrated on 2026-11-11"),
    ("offsite next week", SATURDAY, "offsite the week of 2026-11-23"),
    ("budget next month", SATURDAY, "budget December 2026"),
    ("launch the day after tomorrow", SATURDAY, "launch 2026-11-23"),
    ("flaky since Tuesday", SATURDAY, "flaky since 2026-11-17"),
    ("due Friday", SATURDAY, "due 2026-11-27"),
    ("Ship TOMORROW", SATURDAY, "Ship 2026-11-22"),
    ("Retro NEXT WEEK", SATURDAY, "Retro the week of 2026-11-23"),
    ("Cut 3 Months Ago", SATURDAY, "Cut on 2026-08-21"),
    ("Freeze before Sunday", SATURDAY, "Freeze before 2026-11-22"),
])
def test_relative_phrases(text: str, anchor: date, expected: str) -> None:
    assert absolutize_dates(text, anchor) == expected


@pytest.mark.parametrize("text", [
    "Thursday's standup moved",  # a bare weekday is not a date by itself
    "the `tomorrow` flag in `run --tomorrow`",  # inline code is never touched
    "```\nrun_tomorrow()\nin 2 weeks\n```",  # nor are code fences
    "Tomorrowland is a festival",
])
def test_left_alone(text: str) -> None:
    assert absolutize_dates(text, SATURDAY) == text


def test_idempotent() -> None:
    once = absolutize_dates("Freeze after Thursday, demo tomorrow, retro next week", SATURDAY)
    assert absolutize_dates(once, SATURDAY) == once
