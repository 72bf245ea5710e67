"""A weekday told in the past is a day in the past (issue 28).

"We shipped on Monday" said on a Thursday is the Monday before, not the next one; "We
deployed Friday" (no preposition) is a date too; "last Monday" stays the previous week's; the
future ("We will ship on Monday", "ship on Monday", "next Monday") keeps its reading. Said on
the same weekday, "We shipped on Thursday" is a week ago (today would be said "today") and
"We shipped this Thursday" is today (docs/dates.md). Every case runs with each day of one
week (Monday 2026-11-23 to Sunday 2026-11-29) as today, then through a real ``memdir store``.
"""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from conftest import CLI, cli_json
from memdir import Memdir
from memdir.core.dates import absolutize_dates

WEEK = [date(2026, 11, 23) + timedelta(days=n) for n in range(7)]  # Monday .. Sunday
NAMES = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def before(today: date, weekday: int) -> date:
    """The nearest such weekday strictly before ``today``."""
    return today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)


def on_or_before(today: date, weekday: int) -> date:
    return today - timedelta(days=(today.weekday() - weekday) % 7)


def on_or_after(today: date, weekday: int) -> date:
    return today + timedelta(days=(weekday - today.weekday()) % 7)


def next_week(today: date, weekday: int) -> date:
    return today - timedelta(days=today.weekday()) + timedelta(days=7 + weekday)


def last_week(today: date, weekday: int) -> date:
    return today - timedelta(days=today.weekday()) + timedelta(days=weekday - 7)


# (text with {day}, the phrase that gets the date, how the date is counted)
PAST = [
    ("We shipped on {day}", "on {day}", before),
    ("We deployed {day}", "deployed {day}", before),
    ("it broke on {day}", "on {day}", before),
    ("The outage was on {day}", "on {day}", before),
    ("On {day} we shipped the fix.", "On {day}", before),
    ("We merged it before {day}", "before {day}", before),
    ("Staging was down until {day}", "until {day}", before),
    ("We shipped the fix to staging on {day}", "on {day}", before),
    ("It was deployed on {day}", "on {day}", before),
    ("We shipped this {day}", "this {day}", on_or_before),
    ("last {day} we met the vendor", "last {day}", last_week),
]
FUTURE = [
    ("We will ship on {day}", "on {day}", on_or_after),
    ("We'll ship on {day}", "on {day}", on_or_after),
    ("ship on {day}", "on {day}", on_or_after),
    ("The release is on {day}", "on {day}", on_or_after),
    ("We decided to ship on {day}", "on {day}", on_or_after),
    ("It was postponed until {day}", "until {day}", on_or_after),
    ("It will be deployed on {day}", "on {day}", on_or_after),
    ("Automated backups run on {day}", "on {day}", on_or_after),
    ("On {day} we will ship.", "On {day}", on_or_after),
    ("next {day}", "next {day}", next_week),
    ("We shipped it and demo next {day}", "next {day}", next_week),
]

CASES = [pytest.param(text, phrase, rule, today, n,
                      id=f"{text.format(day=NAMES[n].title())}@{WEEK[w].strftime('%a')}")
         for text, phrase, rule in PAST + FUTURE for n in (0, 3, 4) for w, today in enumerate(WEEK)]


@pytest.mark.parametrize(("text", "phrase", "rule", "today", "weekday"), CASES)
def test_the_tense_decides_which_weekday(text: str, phrase: str, rule: object, today: date,
                                         weekday: int) -> None:
    day = NAMES[weekday].title()
    said = text.format(day=day)
    expected = rule(today, weekday)  # type: ignore[operator]
    dated = phrase.format(day=day) + f" ({expected.isoformat()})"
    out = absolutize_dates(said, today)
    assert dated in out, (said, today, out)
    assert absolutize_dates(out, today + timedelta(days=3)) == out  # dated once, for good


def test_said_on_the_same_weekday() -> None:
    thursday = WEEK[3]
    assert absolutize_dates("We shipped on Thursday", thursday) == \
        "We shipped on Thursday (2026-11-19)"  # a week ago: today is said "today"
    assert absolutize_dates("We shipped this Thursday", thursday) == \
        "We shipped this Thursday (2026-11-26)"  # this week's Thursday is today
    assert absolutize_dates("We deployed Thursday", thursday) == \
        "We deployed Thursday (2026-11-19)"
    assert absolutize_dates("We ship on Thursday", thursday) == \
        "We ship on Thursday (2026-11-26)"  # a plan: today counts


@pytest.mark.parametrize("text", [
    "Thursday's standup moved", "standups are on Thursdays", "We deployed Friday's build",
    "the Monday meeting", "Deploys happen Friday afternoons", "Automated backups Sunday",
    "see `shipped on Monday` in the log",
])
def test_a_bare_weekday_not_after_a_past_verb_stays(text: str) -> None:
    assert absolutize_dates(text, WEEK[3]) == text


def test_both_tenses_in_one_sentence() -> None:
    out = absolutize_dates("We shipped on Monday and will demo on Friday", WEEK[3])
    assert out == "We shipped on Monday (2026-11-23) and will demo on Friday (2026-11-27)"


def test_the_library_stores_the_past_day(md: Memdir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("MEMDIR_NOW", "2026-11-26T15:00:00Z")  # a Thursday
    memory = md.store("We shipped the billing fix on Monday", type="project")
    assert memory.body == "We shipped the billing fix on Monday (2026-11-23)"


def test_a_real_cli_store_dates_the_past(cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDIR_NOW", "2026-11-26T15:00:00Z")  # a Thursday
    monkeypatch.setenv("TZ", "UTC")
    out = cli_json(cli("store", "--type", "project", "It broke on Tuesday after the deploy",
                       "--json"))
    assert isinstance(out, dict)
    assert out["memory"]["content"] == "It broke on Tuesday (2026-11-24) after the deploy"
    out = cli_json(cli("store", "--type", "project", "We will ship on Tuesday", "--json"))
    assert isinstance(out, dict)
    assert out["memory"]["content"] == "We will ship on Tuesday (2026-12-01)"
