"""Relative dates keep their words and gain the absolute date they mean (docs/dates.md).

The table holds, for every rule, the exact date it gives on each day of one week (Monday
2026-11-23 to Sunday 2026-11-29) as "today": next week is 2026-11-30 to 2026-12-06, the
previous one 2026-11-16 to 2026-11-22.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from conftest import CLI, cli_json
from memdir import Memdir
from memdir.core.dates import absolutize_dates
from memdir.core.draft import default_name
from memdir.core.files import slugify

WEEK = [date(2026, 11, 23) + timedelta(days=n) for n in range(7)]  # Monday .. Sunday
DAY_NAMES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
THURSDAY = WEEK[3]


def _days(*values: str) -> tuple[str, ...]:
    """Seven expected meanings, Monday to Sunday; "11-26" is short for "2026-11-26"."""
    assert len(values) == 7
    return tuple(f"2026-{v}" if len(v) == 5 else v for v in values)


def _all(value: str) -> tuple[str, ...]:
    return _days(*[value] * 7)


# On or after today (today included): on, by, after, until, till, due, from, this.
THU_FROM_TODAY = _days("11-26", "11-26", "11-26", "11-26", "12-03", "12-03", "12-03")
# After today (never today): before, coming, this coming.
THU_AFTER_TODAY = _days("11-26", "11-26", "11-26", "12-03", "12-03", "12-03", "12-03")
# Before today (never today): since, past, this past.
THU_BEFORE_TODAY = _days("11-19", "11-19", "11-19", "11-19", "11-26", "11-26", "11-26")

RULES: list[tuple[str, tuple[str, ...]]] = [
    # a bare weekday after a word that makes it a date
    *[(f"{word} Thursday", THU_FROM_TODAY)
      for word in ("on", "by", "after", "until", "till", "due", "from", "this")],
    *[(f"{word} Thursday", THU_AFTER_TODAY) for word in ("before", "coming", "this coming")],
    *[(f"{word} Thursday", THU_BEFORE_TODAY) for word in ("since", "past", "this past")],
    ("on Monday", _days("11-23", "11-30", "11-30", "11-30", "11-30", "11-30", "11-30")),
    ("by Sunday", _all("11-29")),
    ("before Monday", _all("11-30")),
    ("since Monday", _days("11-16", "11-23", "11-23", "11-23", "11-23", "11-23", "11-23")),
    ("since Sunday", _all("11-22")),
    # next / last: that day in next / the previous week (Monday to Sunday)
    ("next Thursday", _all("12-03")),
    ("next Monday", _all("11-30")),
    ("next Sunday", _all("12-06")),
    ("last Thursday", _all("11-19")),
    ("last Monday", _all("11-16")),
    ("last Sunday", _all("11-22")),
    # days
    *[(word, _days("11-23", "11-24", "11-25", "11-26", "11-27", "11-28", "11-29"))
      for word in ("today", "tonight", "this morning", "this afternoon", "this evening",
                   "by EOD", "end of day", "end of the day")],
    *[(word, _days("11-24", "11-25", "11-26", "11-27", "11-28", "11-29", "11-30"))
      for word in ("tomorrow", "tomorrow morning", "tomorrow night", "in 1 day")],
    *[(word, _days("11-22", "11-23", "11-24", "11-25", "11-26", "11-27", "11-28"))
      for word in ("yesterday", "yesterday afternoon", "last night", "1 day ago")],
    *[(word, _days("11-25", "11-26", "11-27", "11-28", "11-29", "11-30", "12-01"))
      for word in ("the day after tomorrow", "in 2 days", "in two days")],
    ("the day before yesterday", _days("11-21", "11-22", "11-23", "11-24", "11-25", "11-26",
                                       "11-27")),
    # counted spans
    ("in a week", _days("11-30", "12-01", "12-02", "12-03", "12-04", "12-05", "12-06")),
    ("in 2 weeks", _days("12-07", "12-08", "12-09", "12-10", "12-11", "12-12", "12-13")),
    ("in 3 months", _days("2027-02-23", "2027-02-24", "2027-02-25", "2027-02-26",
                          "2027-02-27", "2027-02-28", "2027-02-28")),
    ("in one year", _days("2027-11-23", "2027-11-24", "2027-11-25", "2027-11-26",
                          "2027-11-27", "2027-11-28", "2027-11-29")),
    ("10 days ago", _days("11-13", "11-14", "11-15", "11-16", "11-17", "11-18", "11-19")),
    ("2 weeks ago", _days("11-09", "11-10", "11-11", "11-12", "11-13", "11-14", "11-15")),
    ("a month ago", _days("10-23", "10-24", "10-25", "10-26", "10-27", "10-28", "10-29")),
    # periods
    ("this week", _all("2026-11-23 to 2026-11-29")),
    ("next week", _all("2026-11-30 to 2026-12-06")),
    ("last week", _all("2026-11-16 to 2026-11-22")),
    ("this weekend", _all("2026-11-28 to 2026-11-29")),
    ("next weekend", _all("2026-12-05 to 2026-12-06")),
    ("last weekend", _all("2026-11-21 to 2026-11-22")),
    ("this month", _all("November 2026")),
    ("next month", _all("December 2026")),
    ("last month", _all("October 2026")),
    ("this year", _all("2026")),
    ("next year", _all("2027")),
    ("last year", _all("2025")),
    # ends: the working week ends on Friday (on a weekend, the coming one)
    *[(phrase, _days("11-27", "11-27", "11-27", "11-27", "11-27", "12-04", "12-04"))
      for phrase in ("end of the week", "end of this week", "end of week")],
    ("end of next week", _all("12-04")),
    ("end of last week", _all("11-20")),
    ("end of the month", _all("11-30")),
    ("end of month", _all("11-30")),
    ("end of next month", _all("12-31")),
    ("end of last month", _all("10-31")),
    ("end of the year", _all("12-31")),
    ("end of next year", _all("2027-12-31")),
]

CASES = [pytest.param(phrase, WEEK[n], meanings[n], id=f"{phrase}-{DAY_NAMES[n]}")
         for phrase, meanings in RULES for n in range(7)]


@pytest.mark.parametrize(("phrase", "today", "meaning"), CASES)
def test_every_rule_on_every_weekday(phrase: str, today: date, meaning: str) -> None:
    text = f"Note: {phrase}, then more."
    once = absolutize_dates(text, today)
    assert once == f"Note: {phrase} ({meaning}), then more."
    # consolidation re-runs the rules on old memories, from another day: nothing changes
    assert absolutize_dates(once, today) == once
    assert absolutize_dates(once, today + timedelta(days=9)) == once


@pytest.mark.parametrize(("text", "expected"), [
    # the reported case: on Thursday 2026-11-26 "after Thursday" is after today
    ("Merge freeze after Thursday", "Merge freeze after Thursday (2026-11-26)"),
    ("demo next Friday", "demo next Friday (2026-12-04)"),  # next week's, not tomorrow
    ("Ship TOMORROW", "Ship TOMORROW (2026-11-27)"),  # the words keep their spelling
    ("Retro NEXT WEEK", "Retro NEXT WEEK (2026-11-30 to 2026-12-06)"),
    ("freeze from Monday until next Friday",
     "freeze from Monday (2026-11-30) until next Friday (2026-12-04)"),
    ("by the end of next month", "by the end of next month (2026-12-31)"),
    ("broken since last Tuesday", "broken since last Tuesday (2026-11-17)"),
    ("on\nThursday", "on\nThursday (2026-11-26)"),
])
def test_phrases_in_sentences(text: str, expected: str) -> None:
    assert absolutize_dates(text, THURSDAY) == expected


@pytest.mark.parametrize(("text", "today", "expected"), [
    ("next week", date(2026, 12, 31), "next week (2027-01-04 to 2027-01-10)"),
    ("next month", date(2026, 12, 15), "next month (January 2027)"),
    ("last month", date(2026, 1, 15), "last month (December 2025)"),
    ("in 1 month", date(2027, 1, 31), "in 1 month (2027-02-28)"),
    ("in 1 month", date(2028, 1, 31), "in 1 month (2028-02-29)"),
    ("end of the month", date(2028, 2, 3), "end of the month (2028-02-29)"),
    ("end of next month", date(2027, 1, 31), "end of next month (2027-02-28)"),
    ("tomorrow", date(2026, 12, 31), "tomorrow (2027-01-01)"),
    ("last Friday", date(2027, 1, 1), "last Friday (2026-12-25)"),
])
def test_month_and_year_edges(text: str, today: date, expected: str) -> None:
    assert absolutize_dates(text, today) == expected


@pytest.mark.parametrize("text", [
    "Thursday's standup moved",  # a bare weekday is not a date by itself
    "The standup is on Thursdays",  # a habit, not a day
    "tomorrow's release notes",  # possessives are left as written
    "the `tomorrow` flag in `run --tomorrow`",  # inline code is never touched
    "```\nrun_tomorrow()\nin 2 weeks\n```",  # nor are code fences
    "Tomorrowland is a festival",
    "Merge freeze after 2026-12-03",  # already absolute (older memories): left alone
    "after Thursday (2026-11-26)",  # already annotated: no second date
    "on Thursday 2026-11-26",  # a date written right after the words
    "on Thursday, 2026-11-26",
    "next month (December 2026) and next week (2026-11-30 to 2026-12-06)",
])
def test_left_alone(text: str) -> None:
    for today in WEEK:
        assert absolutize_dates(text, today) == text


# -- a phrase is a date only where it stands as words (docs/dates.md, "What is left alone") -----

@pytest.mark.parametrize("text", [
    # URLs: scheme:// up to the next whitespace, whatever is in the path or query
    "Check https://tomorrow.io/status before deploys",
    "see https://example.com/today/report.html",
    "open http://example.com/next week",
    "[link](https://example.com/?when=tomorrow)",
    "<https://x.org/path/monday/by Friday>",  # an autolink runs to its ">"
    # Markdown and HTML link targets
    "[notes](notes/tomorrow)",
    "[notes](<drafts/in 2 days>)",
    "[plan]: /wiki/next week",
    '<a href="/today">',
    # e-mail addresses
    "email me at today@example.com",
    "write to ops@today.example.com",
    "tomorrow+alerts@example.com",
    # paths, file names, identifiers, options: joined by / \ . @ = ? # _ -
    "logs in /var/log/yesterday.log",
    "C:\\logs\\today.txt",
    "cron @daily tonight.sh",
    "use tomorrow.js library",
    "call date.today() first",
    "run_today and today_run",
    "git checkout release/next-week",
    "file report-2-days-ago.txt",
    "the --after Thursday flag",
    "set when=tomorrow in the query ?tomorrow",
    "open tomorrow?tab=2 and the #today channel",
    "a tomorrow-ish plan, the day-after-tomorrow party",
    "today/tomorrow",
    # code: fences of ~~~ as of ```, indented blocks, inline code of any backtick count
    "~~~\nship tomorrow\n~~~",
    "~~~~\nship tomorrow\n~~~\nstill code next week\n~~~~",
    "~~~\nship tomorrow, never closed",
    "    code: ship tomorrow  (indented block)",
    "Run this:\n\n    deploy --when tomorrow\n\tsleep until Monday\n",
    "``a ` in 2 weeks``",
    # a plural's possessive runs on into the next word: no date in the middle of the phrase
    "2 weeks' notice, in 2 weeks' notice",
])
def test_names_and_code_are_left_alone(text: str) -> None:
    for today in WEEK:
        assert absolutize_dates(text, today) == text


@pytest.mark.parametrize(("text", "expected"), [
    # the words next to a name are still words
    ("Check https://tomorrow.io/status before deploys tomorrow",
     "Check https://tomorrow.io/status before deploys tomorrow (2026-11-27)"),
    ("[due tomorrow](https://example.com/?when=tomorrow)",
     "[due tomorrow (2026-11-27)](https://example.com/?when=tomorrow)"),
    ('<a href="/today">today</a>', '<a href="/today">today (2026-11-26)</a>'),
    ("mail today@example.com today", "mail today@example.com today (2026-11-26)"),
    ("```\nship tomorrow\n```\nship tomorrow",
     "```\nship tomorrow\n```\nship tomorrow (2026-11-27)"),
    ("~~~\nship tomorrow\n~~~\nship tomorrow",
     "~~~\nship tomorrow\n~~~\nship tomorrow (2026-11-27)"),
    ("Run:\n\n    make tomorrow\n\nthen ship tomorrow",
     "Run:\n\n    make tomorrow\n\nthen ship tomorrow (2026-11-27)"),
    # an indented line inside a paragraph or list item continues it: not code
    ("- release notes\n    due next Friday", "- release notes\n    due next Friday (2026-12-04)"),
    # a phrase running into code is no date, the phrase inside it may be
    ("ship on\n\n    Thursday", "ship on\n\n    Thursday"),
    ("http://x/the day after tomorrow", "http://x/the day after tomorrow (2026-11-28)"),
    ("``a ` b`` in 2 weeks", "``a ` b`` in 2 weeks (2026-12-10)"),
    # "in N weeks' time" is one phrase: the date goes after "time"
    ("in 2 weeks' time", "in 2 weeks' time (2026-12-10)"),
    ("in 3 days’ time.", "in 3 days’ time (2026-11-29)."),
    ("in a week's time", "in a week's time (2026-12-03)"),
    ("He said 'in 2 weeks'.", "He said 'in 2 weeks (2026-12-10)'."),  # a closing quote
])
def test_dates_beside_names_and_code(text: str, expected: str) -> None:
    once = absolutize_dates(text, THURSDAY)
    assert once == expected
    assert absolutize_dates(once, THURSDAY + timedelta(days=9)) == once


@pytest.mark.parametrize(("text", "expected"), [
    (f"ship {end}", f"ship tomorrow (2026-11-27){end[8:]}")
    for end in ("tomorrow.", "tomorrow,", "tomorrow;", "tomorrow:", "tomorrow!", "tomorrow?",
                "tomorrow...", "tomorrow.\nNext", "tomorrow -- no later", "tomorrow—no later",
                "tomorrow)", "tomorrow\"", "tomorrow'", "tomorrow”", "tomorrow**", "tomorrow*")
] + [
    ("(by Friday)", "(by Friday (2026-11-27))"),
    ('"next week"', '"next week (2026-11-30 to 2026-12-06)"'),
    ("Done.Ship by EOD.", "Done.Ship by EOD (2026-11-26)."),
    ("Can we ship in 2 weeks?", "Can we ship in 2 weeks (2026-12-10)?"),
    ("Shipped 3 days ago, see #42.", "Shipped 3 days ago (2026-11-23), see #42."),
    ("On Monday: retro.", "On Monday (2026-11-30): retro."),
])
def test_sentence_punctuation_still_gets_the_date(text: str, expected: str) -> None:
    assert absolutize_dates(text, THURSDAY) == expected


# -- names and file names ----------------------------------------------------------------------

def test_a_name_keeps_whole_dates_or_none() -> None:
    # 80 characters end inside the second date: the whole parenthesis goes
    long = "a" * 50
    assert default_name(f"{long} next week (2026-11-30 to 2026-12-06) ok") == f"{long} next week…"
    assert default_name(f"{'b' * 66} tomorrow (2026-11-27) ok") == f"{'b' * 66} tomorrow…"
    short = "a" * 30
    assert default_name(f"{short} next week (2026-11-30 to 2026-12-06) ok") == \
        f"{short} next week (2026-11-30 to 2026-12-06) ok"
    # 60 characters end inside the date: "…-thursday-2026" would name no day; it goes whole
    assert slugify(f"{'x' * 40} after Thursday (2026-11-26)") == f"{'x' * 40}-after-thursday"
    assert slugify("2026-11-26 freeze", 7) == "memory"
    assert slugify("Merge freeze after Thursday (2026-11-26)") == \
        "merge-freeze-after-thursday-2026-11-26"


def test_the_same_words_in_another_week_are_another_memory(home: Path, repo: Path) -> None:
    stamp = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    with Memdir(home=home, project=repo, clock=lambda: stamp, sync_interval=0) as md:
        first = md.store("Merge freeze after Thursday", type="project", name="Freeze on Monday")
        again = md.store("Merge freeze after Thursday", type="project")
    assert again.id == first.id and again.reinforced == 1  # same day: the same memory
    assert first.name == "Freeze on Monday (2026-11-30)"  # a given name follows the same rules
    later = stamp + timedelta(days=7)
    with Memdir(home=home, project=repo, clock=lambda: later, sync_interval=0) as md:
        next_week = md.store("Merge freeze after Thursday", type="project")
    assert next_week.id != first.id
    assert next_week.body == "Merge freeze after Thursday (2026-12-03)"


def test_consolidation_dates_old_files_once(home: Path, repo: Path) -> None:
    stamp = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    with Memdir(home=home, project=repo, clock=lambda: stamp, sync_interval=0) as md:
        old = md.store("Release notes owner: Dana", type="project", relevance=0.9)
        rewritten = md.store("Code freeze after 2026-12-03", type="project", relevance=0.9)
    assert old.path is not None and rewritten.path is not None
    # written before the rules, or by hand: relative words left in the file
    old.path.write_text(old.path.read_text().replace("Release notes owner: Dana",
                                                     "Release notes due next Friday"))
    later = stamp + timedelta(days=30)
    with Memdir(home=home, project=repo, clock=lambda: later, sync_interval=0) as md:
        planned = md.consolidate(dry_run=True, use_llm=False)
        dates = [op for op in planned.operations if op.op == "dates"]
        assert [op.memories for op in dates] == [(old.id,)]  # "after 2026-12-03" is left alone
        assert dates[0].changes["body"] == "Release notes due next Friday (2026-12-04)"
        assert "counted from 2026-11-26" in dates[0].reason  # the day it was stored
        md.consolidate(dry_run=False, use_llm=False)
        assert md.get(old.id).body == "Release notes due next Friday (2026-12-04)"
        assert md.get(rewritten.id).body == "Code freeze after 2026-12-03"
        again = md.consolidate(dry_run=True, use_llm=False)
        assert not [op for op in again.operations if op.op == "dates"]


# -- the command line, with a fixed clock (MEMDIR_NOW) and time zone (TZ) -----------------------

def _store(cli: CLI, content: str, monkeypatch: pytest.MonkeyPatch, now: str,
           tz: str) -> dict[str, object]:
    monkeypatch.setenv("MEMDIR_NOW", now)
    monkeypatch.setenv("TZ", tz)
    out = cli_json(cli("store", "--type", "project", content, "--json"))
    assert isinstance(out, dict)
    memory = out["memory"]
    assert isinstance(memory, dict)
    return memory


def test_cli_store_keeps_the_words_and_adds_the_date(cli: CLI,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    memory = _store(cli, "Merge freeze after Thursday", monkeypatch,
                    "2026-11-26T15:00:00Z", "UTC")
    expected = "Merge freeze after Thursday (2026-11-26)"
    assert memory["content"] == expected and memory["name"] == expected
    assert memory["created"] == "2026-11-26T15:00:00Z"
    file = Path(str(memory["file"]))
    assert file.name == "project_merge-freeze-after-thursday-2026-11-26.md"
    text = file.read_text()
    assert text.endswith(f"\n{expected}\n") and f"name: {expected}\n" in text
    assert "2026-12-03" not in text

    kept = _store(cli, "Thursday's standup is at 10:00", monkeypatch,
                  "2026-11-26T15:00:00Z", "UTC")
    assert kept["content"] == "Thursday's standup is at 10:00"


def test_cli_store_leaves_a_url_whole_in_body_name_and_file(
        cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = _store(cli, "Check https://tomorrow.io/status before deploys", monkeypatch,
                    "2026-11-26T15:00:00Z", "UTC")
    expected = "Check https://tomorrow.io/status before deploys"
    assert memory["content"] == expected and memory["name"] == expected
    file = Path(str(memory["file"]))
    assert file.name == "project_check-https-tomorrow-io-status-before-deploys.md"
    text = file.read_text()
    assert "2026-11-27" not in text and text.endswith(f"\n{expected}\n")
    assert f'name: "{expected}"\n' in text  # YAML quotes the ":" of the URL

    both = _store(cli, "Rotate /etc/app/today.key tomorrow", monkeypatch,
                  "2026-11-26T15:00:00Z", "UTC")
    assert both["content"] == both["name"] == "Rotate /etc/app/today.key tomorrow (2026-11-27)"
    assert Path(str(both["file"])).name == \
        "project_rotate-etc-app-today-key-tomorrow-2026-11-27.md"


@pytest.mark.parametrize(("tz", "meaning"), [
    ("EST5", "2026-11-26"),  # 19:30 on Thursday in New York: "after Thursday" is today
    ("UTC", "2026-12-03"),  # 00:30 on Friday in UTC: Thursday is next week's
    ("JST-9", "2026-12-03"),  # 09:30 on Friday in Tokyo
])
def test_cli_today_is_the_local_day(cli: CLI, monkeypatch: pytest.MonkeyPatch, tz: str,
                                    meaning: str) -> None:
    memory = _store(cli, "Merge freeze after Thursday", monkeypatch,
                    "2026-11-27T00:30:00Z", tz)
    assert memory["content"] == f"Merge freeze after Thursday ({meaning})"
    assert memory["created"] == "2026-11-27T00:30:00Z"  # files keep UTC


def test_cli_bad_memdir_now_says_how_to_fix_it(cli: CLI,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDIR_NOW", "next thursday")
    result = cli("store", "--type", "project", "Merge freeze after Thursday")
    assert result.returncode != 0
    assert "MEMDIR_NOW='next thursday' is not a time" in result.stderr
    assert "2026-11-26T10:00:00Z" in result.stderr


def test_anchor_day_follows_tz() -> None:
    code = ("from datetime import datetime, UTC; from memdir.core.dates import anchor_day; "
            "print(anchor_day(datetime(2026, 11, 27, 0, 30, tzinfo=UTC)))")
    days = {}
    for tz in ("EST5", "UTC"):
        env = {**os.environ, "TZ": tz}
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True, timeout=60)
        days[tz] = run.stdout.strip()
    assert days == {"EST5": "2026-11-26", "UTC": "2026-11-27"}


def test_the_docs_list_every_rule() -> None:
    """docs/dates.md is the reference: each phrase family of the table is described there."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "dates.md").read_text()
    for words in ("after", "before", "since", "next", "last", "this coming", "past",
                  "tomorrow", "end of (the / this) week", "end of (the / this / next / last) month",
                  "in N days", "ago",
                  "weekend", "TZ", "MEMDIR_NOW", "(2026-11-26)", "~~~", "indented", "URL",
                  "E-mail", "weeks' time"):
        assert words in doc, words
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "docs/dates.md" in readme
    assert json.dumps("after Thursday (2026-11-26)")[1:-1] in readme
