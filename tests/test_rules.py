"""Rule extraction (seed 002): type mapping, exact contents, every kind of non-rule, the set.

The labelled messages live in tests/data/rule_messages.jsonl; the scoring is the benchmark's
(``bench/extract.py``), so the floors asserted here and the numbers it prints are the same.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest

from memdir.capture.rules import RELEVANCE, Candidate, extract_rules, rule_type
from memdir.core.taxonomy import PRESETS, Taxonomy, TypeSpec, get_taxonomy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.extract import DATA, KINDS, Labelled, evaluate, load_labelled, run

MEMDIR = get_taxonomy("memdir")


def one(text: str) -> Candidate:
    found = extract_rules(text, MEMDIR)
    assert len(found) == 1, found
    return found[0]


def contents(text: str) -> list[tuple[str, str]]:
    return [(c.kind, c.content) for c in extract_rules(text, MEMDIR)]


# -- type mapping ------------------------------------------------------------------------------

@pytest.mark.parametrize(("preset", "expected"), [
    ("memdir", ("preference", "feedback", "policy")),
    ("claude-code", ("user", "feedback", "feedback")),
    ("cognova", ("preference", "fact", "pattern")),
    ("cognitive", ("preference", "fact", "policy")),
    ("records", ("preferences", "principles", "principles")),
])
def test_each_preset_files_each_kind_under_its_nearest_type(
        preset: str, expected: tuple[str, str, str]) -> None:
    taxonomy = get_taxonomy(preset)
    assert tuple(rule_type(k, taxonomy) for k in KINDS) == expected
    text = ("I prefer tabs over spaces. Actually, the default branch is main, not master. "
            "We must support Python 3.9.")
    found = extract_rules(text, taxonomy)
    assert [(c.kind, c.type) for c in found] == list(zip(KINDS, expected, strict=True))
    assert all(c.type in taxonomy.names for c in found)


def test_a_kind_the_taxonomy_has_no_type_for_is_not_extracted() -> None:
    only_facts = Taxonomy("facts", (TypeSpec("fact", "[F]", "Facts", "semantic", "A fact."),))
    assert rule_type("preference", only_facts) is None
    text = "I prefer tabs over spaces. No, the default branch is main, not master."
    assert [(c.kind, c.type) for c in extract_rules(text, only_facts)] == [("correction", "fact")]


def test_every_preset_extracts_the_same_contents() -> None:
    rows = load_labelled()[:120]
    baseline = [[c.content for c in extract_rules(r.text, MEMDIR)] for r in rows]
    for taxonomy in PRESETS.values():
        assert [[c.content for c in extract_rules(r.text, taxonomy)] for r in rows] == baseline


# -- exact contents ----------------------------------------------------------------------------

def test_a_preference_keeps_the_users_words_trimmed() -> None:
    c = one("Please don't use print for debugging output, use the logging module. Thanks!")
    assert c == Candidate(
        kind="preference", type="preference", relevance=0.7,
        content="Don't use print for debugging output, use the logging module",
        excerpt="Please don't use print for debugging output, use the logging module.")


def test_a_correction_drops_its_marker_and_keeps_the_contrast() -> None:
    c = one("No, the default branch is main, not master.")
    assert (c.kind, c.type, c.relevance) == ("correction", "feedback", 0.8)
    assert c.content == "The default branch is main, not master"
    assert c.excerpt == "No, the default branch is main, not master."


def test_a_constraint() -> None:
    c = one("Don't ever commit directly to main!")
    assert (c.kind, c.type, c.relevance, c.content) == (
        "constraint", "policy", 0.9, "Don't ever commit directly to main")


@pytest.mark.parametrize(("text", "expected"), [
    ("i prefer tabs. sorry, I know it's controversial", [("preference", "I prefer tabs")]),
    ("ok so from now on, run ruff before you tell me something is done",
     [("preference", "Run ruff before you tell me something is done")]),
    ("Two things: always use `black` defaults, and we must keep line length at 88.",
     [("preference", "Always use `black` defaults"),
      ("constraint", "We must keep line length at 88")]),
    ("**Never** use `eval` in the parser, please :)",
     [("preference", "Never use `eval` in the parser")]),
    ("No. The timestamps are stored in UTC, the UI converts them.",
     [("correction", "The timestamps are stored in UTC, the UI converts them")]),
    ("It's pnpm, not npm.", [("correction", "It's pnpm, not npm")]),
    ("Actually, releases are cut from the release/* branches, not from main.",
     [("correction", "Releases are cut from the release/* branches, not from main")]),
    ("- always use type hints\n- never commit notebooks with outputs",
     [("preference", "Always use type hints"),
      ("preference", "Never commit notebooks with outputs")]),
    ("It is mandatory to run the security scan before tagging a release.",
     [("constraint", "It is mandatory to run the security scan before tagging a release")]),
])
def test_typical_messages(text: str, expected: list[tuple[str, str]]) -> None:
    assert contents(text) == expected


def test_a_long_sentence_is_cut_at_a_clause_boundary_never_mid_word() -> None:
    text = ("Always use the repository pattern for database access in the services layer, because "
            "mixing raw queries into handlers made the last refactor take three weeks.")
    c = one(text)
    assert c.content == ("Always use the repository pattern for database access in the "
                         "services layer")
    assert c.excerpt == text


def test_a_sentence_that_cannot_be_cut_meaningfully_is_skipped() -> None:
    no_boundary = ("We must make sure that the ingestion pipeline which reads from the three "
                   "regional clusters deduplicates events by their idempotency key first thing")
    # Cutting before "unless" would store a stronger rule than the user stated.
    restriction = ("Never deploy the payments service on a Friday afternoon or during the monthly "
                   "billing window, unless the on-call engineer has approved it in writing")
    assert len(no_boundary) > 100 and len(restriction) > 100
    assert extract_rules(no_boundary, MEMDIR) == []
    assert extract_rules(restriction, MEMDIR) == []


def test_message_index_is_passed_through_and_candidates_are_frozen() -> None:
    c = extract_rules("Never use wildcard imports.", MEMDIR, message_index=7)[0]
    assert c.message_index == 7
    assert extract_rules("Never use wildcard imports.", MEMDIR)[0].message_index == -1
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.content = "x"  # type: ignore[misc]


def test_the_same_memory_twice_in_a_message_is_one_candidate() -> None:
    text = "Never use wildcard imports. Never use wildcard imports!"
    assert len(extract_rules(text, MEMDIR)) == 1


@pytest.mark.parametrize(("text", "expected"), [
    ("Always pin Python 3.11.4 in the Dockerfile, e.g. python:3.11.4-slim. Thanks",
     ["Always pin Python 3.11.4 in the Dockerfile, e.g. python:3.11.4-slim"]),
    ("Never edit pyproject.toml by hand. I prefer uv add for that, i.e. the CLI.",
     ["Never edit pyproject.toml by hand", "I prefer uv add for that, i.e. the CLI"]),
    ("Always link https://wiki.example.com/ops/runbook.html in alerts. Never page the DBA "
     "directly.",
     ["Always link https://wiki.example.com/ops/runbook.html in alerts",
      "Never page the DBA directly"]),
])
def test_sentences_are_not_split_on_abbreviations_versions_file_names_or_urls(
        text: str, expected: list[str]) -> None:
    assert [c for _, c in contents(text)] == expected


# -- what must never become a memory -----------------------------------------------------------

NEGATIVES: dict[str, list[str]] = {
    "questions": [
        "Should we always use dataclasses for the config objects?",
        "do you prefer pytest fixtures or setup methods here?",
        "Can you always add type hints when you touch a function",
        "Is it required to run the migrations before the tests",
    ],
    "code": [
        "Here it is:\n```python\n# never use eval here\nx = 1\n```",
        "~~~\nWARNING: prefer absolute imports over relative ones\n~~~",
        "I ran:\n\n    # we must not skip this step\n    make migrate",
        "The README has `never commit .env files` in it.",
        "import os\nfrom pathlib import Path  # prefer this over os.path",
    ],
    "quotes": [
        "> Always use tabs for indentation",
        'My lead wrote "we must migrate everything to Postgres" in the doc.',
        "Found this in the wiki: 'we can't use Redis for sessions'.",
        "Someone left a comment “never use the ORM for bulk inserts” on the PR.",
    ],
    "hypotheticals and conditionals": [
        "If we never expire the tokens, the table will grow forever.",
        "if you always rebuild the image, CI takes twenty minutes",
        "Suppose we must support Windows too.",
        "What if we always ran the linter on save.",
        "Would it be better to always return a list here.",
    ],
    "reported speech": [
        "The docs say you must call init() before anything else.",
        "He prefers tabs.",
        "The linter says never use bare except.",
        "According to the style guide, imports must be sorted.",
        "My colleague thinks we should always squash merge.",
    ],
    "the task at hand": [
        "actually, let's just run the tests now", "no, try again", "no, that's fine",
        "never mind", "actually wait", "Don't use the cache for this run, I want fresh numbers.",
        "No, I meant the other config file.", "I prefer the first version you showed me.",
    ],
    "negated triggers": [
        "I don't prefer either style.", "It's not necessarily always wrong to use globals.",
        "We don't always need a migration.", "Type hints are not required in notebooks.",
        "This used to always work before the upgrade.",
    ],
    "tool output": [
        "Traceback (most recent call last):\n  File \"a.py\", line 1\nValueError: must be a dict",
        "$ make deploy\nyou must be on the release branch to deploy",
        "2024-05-02 14:03:11 ERROR worker: job must not run twice",
        "src/app.py:88:5: B006 Do not use mutable data structures for argument defaults",
        "FAILED tests/test_api.py::test_login - AssertionError: token must be refreshed",
    ],
    "fragments": ["no", "actually", "Nope.", "always", "must fix", "prefer tabs"],
    "epistemic must and descriptions": [
        "That must be the stale cache again.", "It must have been the timezone conversion.",
        "The deploy always fails on the first try.", "We can't reproduce it locally.",
    ],
}


@pytest.mark.parametrize(("category", "text"),
                         [(k, t) for k, texts in NEGATIVES.items() for t in texts])
def test_non_rules_yield_nothing(category: str, text: str) -> None:
    assert extract_rules(text, MEMDIR) == [], category


@pytest.mark.parametrize(("blocked", "plain"), [
    ("`never use eval` is in the README", "Never use eval in the parser."),
    ('He said "always use tabs".', "Always use tabs."),
    ("If we must support Windows, paths break.", "We must support Windows."),
    ("The docs say you must call init() first.", "You must call init() first."),
    ("Should we never use global state?", "Never use global state."),
    ("I don't prefer TOML over YAML.", "I prefer TOML over YAML."),
    ("For now, always use the mock server.", "Always use the mock server."),
])
def test_each_blocker_is_what_stops_the_trigger(blocked: str, plain: str) -> None:
    assert extract_rules(blocked, MEMDIR) == []
    assert len(extract_rules(plain, MEMDIR)) == 1


SECRET_MESSAGES = [
    "Always use this token for staging: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "From now on use sk-proj-abcdefghijklmnopqrstuvwxyz123456 for OpenAI calls.",
    "We must connect with postgres://admin:hunter22@db.internal:5432/app in CI.",
    "I prefer keeping password=Sup3rSecret99 in the .env file.",
    "Never rotate AKIAIOSFODNN7EXAMPL3.\n\nAlso, never use wildcard imports.",
    "Always send Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345 upstream.",
]


@pytest.mark.parametrize("text", SECRET_MESSAGES)
def test_a_message_with_a_secret_yields_nothing(text: str) -> None:
    assert extract_rules(text, MEMDIR) == []


def test_private_spans_are_never_captured() -> None:
    text = "Always use tabs. <private>Never use the staging key from the vault.</private>"
    assert contents(text) == [("preference", "Always use tabs")]


# -- the labelled set --------------------------------------------------------------------------

def test_the_labelled_set_is_big_varied_and_mostly_negative() -> None:
    lines = DATA.read_text(encoding="utf-8").splitlines()
    raw = [json.loads(line) for line in lines]
    assert len(raw) >= 200
    assert sum(1 for r in raw if not r["expect"]) / len(raw) >= 0.55
    assert len({r["text"] for r in raw}) == len(raw)
    for r in raw:
        assert {e["kind"] for e in r["expect"]} <= set(KINDS)
        assert all(e["contains"].strip() for e in r["expect"])
    assert any(len(r["expect"]) > 1 for r in raw)


def test_the_scoring_counts_matches_misses_and_strays() -> None:
    item = Labelled("x", (("preference", ("tabs",)), ("constraint", ("main",))))
    pref = Candidate("preference", "preference", "I prefer tabs", 0.7, "x")
    stray = Candidate("correction", "feedback", "Tabs, not spaces", 0.8, "x")
    score = evaluate([(item, [pref, stray])])
    assert (score.overall.tp, score.overall.fp, score.overall.fn) == (1, 1, 1)
    assert score.by_kind["constraint"].recall == 0.0
    assert score.by_kind["preference"].precision == 1.0
    wrong_kind = Candidate("constraint", "policy", "I prefer tabs", 0.9, "x")
    assert evaluate([(item, [wrong_kind])]).overall.tp == 0


def test_precision_and_recall_on_the_labelled_set() -> None:
    score = run(load_labelled())
    assert score.overall.precision >= 0.95, score.false_positives
    assert score.overall.recall >= 0.9, score.false_negatives
    for kind in KINDS:
        assert score.by_kind[kind].precision >= 0.9, (kind, score.false_positives)


def test_every_content_is_short_trimmed_and_cut_on_a_word_boundary() -> None:
    seen = 0
    for row in load_labelled():
        for c in extract_rules(row.text, MEMDIR):
            seen += 1
            assert 10 <= len(c.content) <= 100 and len(c.excerpt) <= 300
            assert c.relevance == RELEVANCE[c.kind]
            assert not re.search(r"[\s,;:.!-]$", c.content) and not c.content[0].islower()
            excerpt = " ".join(c.excerpt.replace("**", "").split())
            at = excerpt.lower().find(c.content[1:].lower())
            assert at > 0, (c.content, c.excerpt)
            after = excerpt[at + len(c.content) - 1:at + len(c.content)]
            assert not after.isalnum(), (c.content, c.excerpt)  # never cut mid-word
    assert seen > 200
