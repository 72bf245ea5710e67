"""Conflicts: memories that say opposite things of one thing.

Seed 004: the rule (:mod:`memdir.upkeep.conflicts`) on hand-made labelled pairs, then
``Memdir.conflicts`` with a team directory in the repository, and how ``memdir store`` and
MCP ``memory_learn`` report them (the team scope over a server: tests/test_team.py).
Issue 21: consolidation plans memories that disagree as a ``conflict`` and never merges or
archives them by rules: through the real CLI (the "pnpm over npm" case), ``doctor``, MCP
``memory_consolidate`` and the HTTP API. The labelled pairs of
``tests/data/near_duplicates.jsonl`` are judged in tests/test_merge_pairs.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import CLI, cli_json
from llm_support import ScriptedServer
from memdir import Memdir
from memdir.agents.mcp_server import build_server
from memdir.upkeep.conflicts import TOPIC_OVERLAP, conflict, contradicts

# (a, b, label): True when the two say opposite things about the same thing.
CONTRADICTIONS = [
    ("Always mock the database in integration tests.",
     "Never mock the database in integration tests; use the real instance."),
    ("Don't mock the database in integration tests.\n\n**Why:** mocked tests passed while "
     "production broke.\n**How to apply:** use the real database.",
     "Mock the database in integration tests to keep them fast."),
    ("Keep the line length limit at 100 characters.", "The line length limit is 120 characters."),
    ("Indent Python code with tabs.", "Indent Python code with spaces."),
    ("Rebase feature branches onto main before merging.",
     "Never rebase feature branches onto main."),
    ("Squash commits when merging pull requests.",
     "Do not squash commits when merging pull requests."),
    ("Use PostgreSQL 15 for the test database.", "Use PostgreSQL 16 for the test database."),
    ("Write commit messages in the imperative mood.",
     "Don't write commit messages in the imperative mood."),
    ("Run the full test suite before every push.",
     "Skip running the full test suite before pushing; CI does it."),
    ("Use dark mode in the web page by default.", "The web page uses the light theme by default."),
    ("Reviews need two approvals before merging.",
     "One approval is enough to merge a pull request."),
]
PARAPHRASES = [
    ("Don't mock the database in integration tests.",
     "Integration tests must never use database mocks."),
    ("Use a real database in integration tests instead of mocks.",
     "Never mock the database in integration tests."),
    ("Keep the line length limit at 100 characters.", "Line length: max 100 characters per line."),
    ("Prefer small pull requests that are easy to review.",
     "Keep pull requests small so they are easy to review."),
    ("Indent Python code with four spaces.", "Python code is indented with 4 spaces."),
]
UNRELATED = [
    ("Never commit secrets to the repository.", "Use spaces for indentation in YAML files."),
    ("Don't deploy on Fridays.", "The staging server runs Ubuntu 24.04."),
    ("Always run ruff before committing.", "Never use print for logging in the server."),
    ("Don't deploy on Fridays.", "Deploy the docs site on every merge to main."),
]
SAME_TOPIC_NOT_OPPOSITE = [  # same polarity, or a different claim about a shared topic
    ("Never push directly to main.", "Don't force-push to main."),
    ("Use pytest for unit tests.", "Use pytest fixtures for temporary directories in unit tests."),
    ("Avoid global state in the CLI.", "Don't keep global state in CLI commands."),
    ("Never store API keys in the repository.",
     "Store the API client's retry settings in config.toml."),
    ("Avoid network calls in unit tests.",
     "Integration tests make network calls to the staging server."),
    ("Don't log request bodies in the API server.",
     "The API server logs every request to journald."),
]
PAIRS = ([(a, b, True) for a, b in CONTRADICTIONS]
         + [(a, b, False) for a, b in PARAPHRASES + UNRELATED + SAME_TOPIC_NOT_OPPOSITE])
# What word overlap cannot see: number words ("two" / "one"), and a negation or a shared
# word about a neighbouring claim (bodies vs requests). And antonyms beside another wording
# ("dark mode" / "the light theme"): one rule with consolidation's, which counts antonyms
# only when the rest of the words are close.
KNOWN_MISSES = {CONTRADICTIONS[-1], CONTRADICTIONS[-2], SAME_TOPIC_NOT_OPPOSITE[-1]}


def _correct(threshold: float) -> int:
    return sum(contradicts(a, b, threshold=threshold) == label
               and contradicts(b, a, threshold=threshold) == label for a, b, label in PAIRS)


def test_the_rule_on_labelled_pairs() -> None:
    for a, b, label in PAIRS:
        expected = label != ((a, b) in KNOWN_MISSES)
        assert contradicts(a, b) == expected, (a, b)
        assert contradicts(b, a) == expected, (b, a)  # symmetric


def test_no_paraphrase_or_unrelated_pair_is_a_conflict() -> None:
    assert not [p for p in PARAPHRASES + UNRELATED if contradicts(*p) or contradicts(*p[::-1])]


def test_the_threshold_is_the_best_on_the_pairs() -> None:
    """TOPIC_OVERLAP was chosen on these pairs: none of the other thresholds does better,
    and the lowest of the best keeps the most recall for long team memories."""
    candidates = [round(0.1 * n, 1) for n in range(1, 11)]
    best = max(_correct(t) for t in candidates)
    assert _correct(TOPIC_OVERLAP) == best == len(PAIRS) - len(KNOWN_MISSES)
    # Since the claims are aligned first (issue 28), a lower threshold no longer warns about a
    # neighbouring claim: the alignment or the stance decides, not the topic alone.
    assert _correct(min(candidates)) == best


def test_memdir_conflicts_with_the_repository_team_directory(md: Memdir, repo: Path) -> None:
    team = md.store("Never mock the database in integration tests.", type="feedback",
                    scope="team")
    fact = md.store("The integration tests database is never mocked.", type="fact",
                    scope="team")
    old = md.store("Always squash commits when merging pull requests.", type="feedback",
                   scope="team")
    md.archive(old.id)
    assert team.path is not None and team.path.parent == repo / ".memdir" / "team"

    mine = md.store("Always mock the database in integration tests.", type="feedback")
    # Issue 28: every type and every scope in play; both memories are kept.
    assert {m.id for m in md.conflicts(mine)} == {team.id, fact.id}
    agree = md.store("Don't use mocks for the database in integration tests.", type="feedback",
                     scope="user")
    assert {m.id for m in md.conflicts(agree)} == {mine.id}  # the team's agree with it
    squash = md.store("Never squash commits when merging pull requests.", type="feedback")
    assert md.conflicts(squash) == []  # the team memory it contradicts is archived
    as_fact = md.store("Always mock the database in the integration tests suite.", type="fact")
    assert team.id in {m.id for m in md.conflicts(as_fact)}  # a fact is checked too
    assert mine.id in {m.id for m in md.conflicts(team)}  # and a team memory
    assert all(md.get(ref).status == "active" for ref in (team.id, fact.id, mine.id, agree.id))


def test_cli_store_warns_about_a_conflict(cli: CLI) -> None:
    team = cli_json(cli("store", "--scope", "team", "--type", "feedback", "--json",
                        "Indent Python code with spaces."))
    assert isinstance(team, dict)
    team_id = team["memory"]["id"]

    result = cli("store", "--type", "preference", "--json", "Indent Python code with tabs.")
    data = cli_json(result)  # another type: warned all the same (issue 28), with both ids
    assert isinstance(data, dict) and [c["id"] for c in data["conflicts"]] == [team_id]
    assert f"memory {data['memory']['id']} may contradict team memory {team_id}" in \
        result.stderr

    result = cli("store", "--type", "feedback", "Indent Python code with tabs, please.")
    assert result.returncode == 0, result.stderr
    assert f"may contradict team memory {team_id}" in result.stderr
    assert "hint:" in result.stderr and result.stdout.startswith("stored ")

    result = cli("store", "--type", "feedback", "--json", "--scope", "user",
                 "Indent the Python code with tabs.")
    data = cli_json(result)
    assert isinstance(data, dict)
    assert [c["id"] for c in data["conflicts"]] == [team_id]
    assert data["conflicts"][0]["scope"] == "team"
    assert f"team memory {team_id}" in result.stderr

    data = cli_json(cli("store", "--type", "feedback", "--json", "Write docstrings for modules."))
    assert isinstance(data, dict) and data["conflicts"] == []


def test_mcp_learn_returns_the_conflicts(md: Memdir) -> None:
    team = md.store("Rebase feature branches onto main before merging.", type="feedback",
                    scope="team")
    out: dict[str, Any] = {}

    async def main() -> None:
        async with Client(build_server(md=md), read_timeout_seconds=30) as client:
            clash = await client.call_tool("memory_learn", {
                "content": "Never rebase feature branches onto main.", "type": "feedback"})
            fine = await client.call_tool("memory_learn", {
                "content": "Name feature branches after their ticket.", "type": "feedback"})
            out.update(clash=clash.structured_content, fine=fine.structured_content,
                       text=clash.content[0].text if clash.content else "")

    anyio.run(main)
    assert [c["id"] for c in out["clash"]["conflicts"]] == [team.id]
    assert out["clash"]["conflicts"][0]["scope"] == "team"
    assert json.loads(out["text"])["conflicts"][0]["id"] == team.id
    assert out["fine"]["conflicts"] == []


# -- consolidation: memories that disagree are a conflict, never a merge (issue 21) -----------

PNPM = ["I prefer pnpm over npm.", "I prefer pnpm over npm for installs.",
        "Prefer pnpm over npm.", "I prefer npm over pnpm."]
# The older memory is named first; stored in one second, either may be the older.
SWAPPED = ("they disagree: one prefers 'pnpm' over 'npm', the other 'npm' over 'pnpm'",
           "they disagree: one prefers 'npm' over 'pnpm', the other 'pnpm' over 'npm'")


def test_pnpm_over_npm_is_a_conflict_not_a_merge_through_the_cli(cli: CLI) -> None:
    """The reported case: three "pnpm over npm" memories and one "npm over pnpm" were merged
    as "near-duplicates" and `--yes` archived the three pnpm ones."""
    ids = []
    for text in PNPM:
        stored = cli_json(cli("store", "--type", "preference", "--json", text))
        assert isinstance(stored, dict)
        ids.append(stored["memory"]["id"])
    *pnpm, npm = ids
    expected = {frozenset((p, npm)) for p in pnpm}

    applied = cli("consolidate", "--yes")
    assert applied.returncode == 0, applied.stderr
    lines = applied.stdout.splitlines()
    assert lines[0] == "applied: 0 operations"
    assert lines[1] == "3 conflicts: never merged or archived by rules"
    shown = {frozenset(line.split(":")[0].removeprefix("  conflict ").split(", "))
             for line in lines[2:5]}
    assert shown == expected
    assert all(line.endswith(SWAPPED) for line in lines[2:5])
    assert "to resolve:" in lines[5] and "memdir archive" in lines[5]
    listed = cli_json(cli("list", "--status", "all", "--json"))
    assert isinstance(listed, list) and len(listed) == 4
    assert {m["status"] for m in listed} == {"active"}  # nothing archived, nothing merged
    assert not (Path(listed[0]["file"]).parent.parent.parent / "history.jsonl").exists()

    plan = cli_json(cli("consolidate", "--json"))
    assert isinstance(plan, dict) and plan["applied"] is False
    assert {op["op"] for op in plan["operations"]} == {"conflict"}
    assert {frozenset(op["memories"]) for op in plan["operations"]} == expected
    assert all(op["reason"] in SWAPPED and op["changes"] == {} for op in plan["operations"])

    doctor = cli("doctor")
    assert doctor.returncode == 0, doctor.stdout  # a notice, not a fault
    assert doctor.stdout.count("- [memory-conflict] ") == 3
    found = cli_json(cli("doctor", "--json"))
    assert isinstance(found, list)
    notices = [p for p in found if p["kind"] == "memory-conflict"]
    reasons = tuple(r.removeprefix("they disagree: ") for r in SWAPPED)
    assert len(notices) == 3 and all(npm in p["message"] and p["message"].endswith(reasons)
                                     and "memdir archive" in p["hint"]
                                     and "MEMDIR_LLM" in p["hint"] for p in notices)


def test_a_conflict_holds_both_memories_out_of_merges_and_archives(home: Path,
                                                                    repo: Path) -> None:
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    with Memdir(home=home, project=repo, clock=lambda: start) as md:
        weak = md.store("Enable HTTP/2 on the internal load balancer.", type="fact",
                        relevance=0.2)
    with Memdir(home=home, project=repo, clock=lambda: start + timedelta(days=1)) as md:
        strong = md.store("Disable HTTP/2 on the internal load balancer.", type="fact")
        keep = md.store("Deploys go through ArgoCD, never through kubectl apply",
                        type="decision")
        dup = md.store("Deploys go through ArgoCD, never through kubectl apply by hand",
                       type="decision")
    later = start + timedelta(days=400)  # the weak one is far below the archive strength
    with Memdir(home=home, project=repo, clock=lambda: later) as md:
        applied = md.consolidate(dry_run=False)
        ops = {op.op: op for op in applied.operations}
        assert ops["conflict"].memories == (weak.id, strong.id)
        assert ops["conflict"].reason == ("they disagree: opposite words: 'enable' in one, "
                                          "'disable' in the other")
        assert set(ops["merge"].memories) == {keep.id, dup.id}
        assert weak.id not in {i for op in applied.operations if op.op != "conflict"
                               for i in op.memories}
        assert md.get(weak.id).status == md.get(strong.id).status == "active"


def test_conflicting_pairs_finds_every_pair_the_rule_accepts() -> None:
    """The bounded candidate indexes (a fixed number of neighbours per memory, issue 28)
    find what comparing every pair finds, all but at most 1% of it, and nothing else."""
    import itertools

    from memdir.core.model import Memory
    from memdir.upkeep.conflicts import conflict, conflicting_pairs

    data = Path(__file__).parent / "data" / "near_duplicates.jsonl"
    texts = sorted({t for line in data.read_text("utf-8").splitlines() if line.strip()
                    for t in (json.loads(line)["a"], json.loads(line)["b"])})
    memories = [Memory(id=f"m{n:04d}", name=t[:40], description=t[:80], type="fact",
                       scope="project", body=t) for n, t in enumerate(texts)]
    found = {(c.older.id, c.newer.id) for c in conflicting_pairs(memories)}
    every = {(a.id, b.id) for a, b in itertools.combinations(memories, 2)
             if conflict(a.body, b.body)}
    assert found <= every and len(found) > 100
    assert len(every - found) <= len(every) // 100, every - found


def test_mcp_consolidate_and_the_api_report_conflicts(home: Path, repo: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from server_support import running_server

    day = datetime.now(UTC) - timedelta(days=2)
    with Memdir(home=home, project=repo, clock=lambda: day) as md:
        older = md.store("Prefer pytest over unittest for new tests.", type="preference")
        md.store("The docs site is built with MkDocs.", type="fact")
    with Memdir(home=home, project=repo, clock=lambda: day + timedelta(days=1)) as md:
        newer = md.store("Prefer unittest over pytest for new tests.", type="preference")
    out: dict[str, Any] = {}
    md = Memdir(home=home, project=repo)

    async def main() -> None:
        async with Client(build_server(md=md), read_timeout_seconds=30) as client:
            plan = await client.call_tool("memory_consolidate", {"dry_run": False})
            tools = (await client.list_tools()).tools
            out.update(plan=plan.structured_content,
                       doc=next(t.description for t in tools if t.name == "memory_consolidate"))

    with md:
        anyio.run(main)
    assert out["plan"]["applied"] is True
    assert [(op["op"], op["memories"]) for op in out["plan"]["operations"]] == [
        ("conflict", [older.id, newer.id])]
    assert "pytest" in out["plan"]["operations"][0]["reason"]
    assert '"conflict"' in out["doc"] and "never merged or archived" in " ".join(out["doc"].split())
    with Memdir(home=home, project=repo) as md:
        assert md.get(older.id).status == md.get(newer.id).status == "active"

    with running_server(home, repo) as server:
        answer = server.request("GET", "/api/memory/conflicts")
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"total": 1, "limit": 20, "offset": 0, "conflicts": [{
            "memories": [older.id, newer.id], "scope": "project", "type": "preference",
            "reason": "one prefers 'pytest' over 'unittest', the other 'unittest' over "
                      "'pytest'"}]}
        only_facts = server.request("GET", "/api/memory/conflicts", params={"type": "fact"})
        assert only_facts.json() == {"total": 0, "limit": 20, "offset": 0, "conflicts": []}
        past = server.request("GET", "/api/memory/conflicts", params={"offset": 1})
        assert past.json() == {"total": 1, "limit": 20, "offset": 1, "conflicts": []}


# -- what a conflict says: the order read, whole numbers, which memory is older ---------------

CI_ORDER = "CI runs unit tests before integration tests"
CI_CONVERSE = "CI runs integration tests after unit tests"  # the same order, said the other way
CI_REVERSED = "CI runs integration tests before unit tests"


def test_a_before_after_paraphrase_is_not_a_conflict_through_the_cli(cli: CLI) -> None:
    """"X before Y" is "Y after X": the phrases next to the pivot are ordered, not the
    subject ("CI") nor a word on both sides ("tests") against the other phrase."""
    first = cli_json(cli("store", "--type", "project", "--json", CI_ORDER))
    cli("store", "--type", "project", "--json", CI_CONVERSE, check=True)
    plan = cli_json(cli("consolidate", "--json"))
    assert isinstance(plan, dict) and [op for op in plan["operations"]
                                       if op["op"] == "conflict"] == []
    doctor = cli_json(cli("doctor", "--json"))
    assert isinstance(doctor, list) and [p for p in doctor if p["kind"] == "memory-conflict"] == []

    reversed_ = cli_json(cli("store", "--type", "project", "--json", CI_REVERSED))
    assert isinstance(first, dict) and isinstance(reversed_, dict)
    plan = cli_json(cli("consolidate", "--json"))
    assert isinstance(plan, dict)
    found = [op for op in plan["operations"] if op["op"] == "conflict"]
    assert len(found) == 2  # against both wordings of the first order
    assert set(found[0]["memories"]) | set(found[1]["memories"]) >= {
        first["memory"]["id"], reversed_["memory"]["id"]}
    for op in found:
        assert op["reason"].startswith(
            "they disagree: the order is reversed: 'unit' before 'integration' in one, after "
            "it in the other") or op["reason"].startswith(
            "they disagree: the order is reversed: 'integration' before 'unit' in one, after "
            "it in the other"), op["reason"]


@pytest.mark.parametrize(("a", "b"), [
    (CI_ORDER, CI_CONVERSE),
    ("Run migrations before deploying the api", "Deploy the api after running migrations"),
    ("Lint runs before tests in CI", "In CI, tests run after lint"),
    ("Rebase on main before opening a PR", "Open a PR after rebasing on main"),
    ("Update the changelog before tagging a release",
     "Tag a release after updating the changelog"),
])
def test_x_before_y_is_y_after_x(a: str, b: str) -> None:
    assert conflict(a, b) is None and conflict(b, a) is None
    assert not contradicts(a, b) and not contradicts(b, a)


@pytest.mark.parametrize(("a", "b", "words"), [
    (CI_ORDER, CI_REVERSED, ("unit", "integration")),
    (CI_CONVERSE, "CI runs unit tests after integration tests", ("unit", "integration")),
    (CI_ORDER, "CI runs unit tests after integration tests", ("unit", "integration")),
    ("Run migrations before deploying the api", "Deploy the api before running migrations",
     ("migrations", "api")),
])
def test_a_before_b_against_b_before_a_is_a_conflict(a: str, b: str,
                                                     words: tuple[str, str]) -> None:
    x, y = words
    assert conflict(a, b) == (f"the order is reversed: {x!r} before {y!r} in one, after it in "
                              "the other")
    assert conflict(b, a) is not None and contradicts(a, b) and contradicts(b, a)


@pytest.mark.parametrize(("a", "b", "reason"), [
    ("Tests run on Python 3.11", "Tests run on Python 3.12",
     "other numbers: 3.11 in one, 3.12 in the other"),
    ("Ship after Thursday (2026-11-26)", "Ship after Thursday (2026-12-03)",
     "other numbers: 2026-11-26 in one, 2026-12-03 in the other"),
    ("The release is 2026-11-26, version 2.4.1", "The release is 2026-11-26, version 2.5",
     "other numbers: 2.4.1 in one, 2.5 in the other"),
])
def test_a_conflict_quotes_whole_numbers_versions_and_dates(a: str, b: str,
                                                            reason: str) -> None:
    assert conflict(a, b) == reason


def test_a_date_memdir_added_is_part_of_the_claim(home: Path, repo: Path) -> None:
    """"next Thursday" is written as "Thursday (YYYY-MM-DD)": the same words with another
    date are the plan moved (a conflict: the newer usually replaces the older, which a person
    or a model decides); other words with another date are two plans, not a conflict."""
    from datetime import UTC, datetime, timedelta

    week = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    with Memdir(home=home, project=repo, clock=lambda: week) as md:
        older = md.store("Ship the release after next Thursday", type="project")
        md.store("Freeze the docs after next Thursday", type="project")
    with Memdir(home=home, project=repo, clock=lambda: week + timedelta(days=7)) as md:
        newer = md.store("Ship the release after next Thursday", type="project")
        md.store("Demo the release after next Thursday", type="project")
        assert md.get(older.id).body.endswith("(2026-11-26)")
        assert md.get(newer.id).body.endswith("(2026-12-03)")
        plan = md.consolidate(dry_run=True)
    assert [(op.memories, op.reason) for op in plan.conflicts] == [
        ((older.id, newer.id),
         "they disagree: other numbers: 2026-11-26 in one, 2026-12-03 in the other")]


@pytest.mark.parametrize(("team", "mine"), [
    ("Logs are kept for 30 days", "Metrics are kept for 90 days"),
    ("The staging database is on port 5432", "The production database is on port 5433"),
    ("The max upload size is 10 MB", "The min upload size is 1 KB"),
])
def test_other_numbers_of_another_subject_are_no_store_warning(team: str, mine: str) -> None:
    """One rule for the store-time warning and consolidation: other numbers count only when
    no other word is swapped ("Logs" / "Metrics", "staging" / "production")."""
    assert not contradicts(team, mine) and not contradicts(mine, team)
    assert conflict(team, mine) is None


@pytest.mark.parametrize(("team", "mine"), [
    ("Logs are kept for 30 days", "Logs are kept for 90 days"),
    ("The staging database is on port 5432", "The staging database uses port 5433"),
    ("The max upload size is 10 MB", "Keep the max upload size at 20 MB"),
])
def test_other_numbers_of_one_subject_still_warn(team: str, mine: str) -> None:
    """The rest is the same words but for how it is said ("uses", "keep")."""
    assert contradicts(team, mine) and contradicts(mine, team)


def test_cli_store_warns_no_more_about_another_subjects_number(cli: CLI) -> None:
    cli("store", "--type", "feedback", "--scope", "team", "Logs are kept for 30 days",
        check=True)
    result = cli("store", "--type", "feedback", "Metrics are kept for 90 days")
    assert result.returncode == 0, result.stderr
    assert "may contradict" not in result.stderr
    result = cli("store", "--type", "feedback", "Logs are kept for 90 days")
    assert "may contradict team memory" in result.stderr


def _same_second_pair(home: Path, repo: Path) -> tuple[str, str]:
    """Two memories that disagree, stored one after the other in one second (the clock is
    fixed at the real current second, so each file's mtime is in its ``updated`` second)."""
    from datetime import UTC, datetime

    second = datetime.now(UTC).replace(microsecond=0)
    with Memdir(home=home, project=repo, clock=lambda: second) as md:
        first = md.store("The staging database runs Postgres 15", type="project")
        then = md.store("The staging database runs Postgres 16", type="project")
    assert first.updated == then.updated
    return first.id, then.id


def _set_written(md: Memdir, ref: str, offset_ns: int) -> None:
    import os

    memory = md.get(ref)
    assert memory.path is not None
    at = int(memory.updated.timestamp()) * 1_000_000_000 + offset_ns
    os.utime(memory.path, ns=(at, at))


def test_in_one_second_the_files_tell_which_was_written_first(home: Path, repo: Path) -> None:
    from memdir.upkeep.conflicts import conflicting_pairs, written_order

    first, then = _same_second_pair(home, repo)
    with Memdir(home=home, project=repo) as md:
        [found] = conflicting_pairs(md.list())
        assert (found.older.id, found.newer.id, found.ordered) == (first, then, True)
        assert found.reason == "other numbers: 15 in one, 16 in the other"
        # Not the ids: the order follows the files, whichever way round they are.
        _set_written(md, first, 900_000_000)
        _set_written(md, then, 100_000_000)
        [found] = conflicting_pairs(md.list())
        assert (found.older.id, found.newer.id, found.ordered) == (then, first, True)
        a, b = md.get(first), md.get(then)
        assert written_order(a, b) == written_order(b, a) == (b, a, True)


def test_when_the_order_cannot_be_known_the_conflict_says_so(home: Path, repo: Path) -> None:
    from memdir.upkeep.conflicts import UNORDERED, conflicting_pairs

    first, then = _same_second_pair(home, repo)
    with Memdir(home=home, project=repo) as md:
        for ref in (first, then):  # files copied later (a checkout, a restore): no witness
            _set_written(md, ref, 3600 * 1_000_000_000)
        [found] = conflicting_pairs(md.list())
        assert found.ordered is False and {found.older.id, found.newer.id} == {first, then}
        assert found.older.id < found.newer.id  # a stable order to show, not a claim
        assert found.to_dict()["reason"] == found.reason + UNORDERED
        [op] = md.consolidate(dry_run=True).conflicts
        assert op.reason == "they disagree: " + found.reason + UNORDERED
        notice = next(p for p in md.doctor() if p.kind == "memory-conflict")
        assert "the newer" not in notice.message and notice.message.endswith(UNORDERED)


def test_a_model_verdict_never_archives_when_the_order_is_unknown(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch,
        scripted_llm: ScriptedServer) -> None:
    """consolidate_llm tells the model "A is the older, B the newer" and archives A when it
    says B replaces it: only when that order is known."""
    monkeypatch.setenv("MEMDIR_LLM", "openai:m")
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_llm.url + "/v1")
    first, then = _same_second_pair(home, repo)
    verdict = {"contradictions": [{"pair": 1, "newer_replaces_older": True,
                                   "reason": "staging was upgraded"}]}
    with Memdir(home=home, project=repo) as md:
        for ref in (first, then):
            _set_written(md, ref, 3600 * 1_000_000_000)
        scripted_llm.reply_openai(json.dumps(verdict))
        applied = md.consolidate(dry_run=False)
        [op] = applied.operations
        assert op.op == "conflict" and set(op.memories) == {first, then}
        assert op.reason.endswith("; the LLM says one replaces the other, but which was "
                                  "written first is unknown: check them: staging was upgraded")
        assert md.get(first).status == md.get(then).status == "active"
        asked = json.dumps(scripted_llm.requests[0].body)
        assert "which is newer is unknown" in asked

        # Known (the files tell): the model's verdict archives the one written first.
        _set_written(md, first, 100_000_000)
        _set_written(md, then, 900_000_000)
        scripted_llm.reply_openai(json.dumps(verdict))
        applied = md.consolidate(dry_run=False)
        assert [(op.op, op.memories) for op in applied.operations] == [
            ("supersede", (first, then))]
        assert md.get(first).status == "archived" and md.get(then).status == "active"
