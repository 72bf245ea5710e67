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
from mcp import Client

from conftest import CLI, cli_json
from memdir import Memdir
from memdir.agents.mcp_server import build_server
from memdir.upkeep.conflicts import TOPIC_OVERLAP, contradicts

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
# word about a neighbouring claim ("unit" vs "integration" tests, bodies vs requests).
KNOWN_MISSES = {CONTRADICTIONS[-1], SAME_TOPIC_NOT_OPPOSITE[-2], SAME_TOPIC_NOT_OPPOSITE[-1]}


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
    assert min(t for t in candidates if _correct(t) == best) == TOPIC_OVERLAP


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
    assert [m.id for m in md.conflicts(mine)] == [team.id]  # not the fact, same words
    agree = md.store("Don't use mocks for the database in integration tests.", type="feedback",
                     scope="user")
    assert md.conflicts(agree) == []
    squash = md.store("Never squash commits when merging pull requests.", type="feedback")
    assert md.conflicts(squash) == []  # the team memory it contradicts is archived
    as_fact = md.store("Always mock the database in the integration tests suite.", type="fact")
    assert md.conflicts(as_fact) == []  # only feedback-like types are checked
    assert md.conflicts(team) == [] and fact.id not in {m.id for m in md.conflicts(mine)}


def test_cli_store_warns_about_a_conflict(cli: CLI) -> None:
    team = cli_json(cli("store", "--scope", "team", "--type", "feedback", "--json",
                        "Indent Python code with spaces."))
    assert isinstance(team, dict)
    team_id = team["memory"]["id"]

    result = cli("store", "--type", "preference", "--json", "Indent Python code with tabs.")
    data = cli_json(result)
    assert isinstance(data, dict) and data["conflicts"] == []  # another type: preference

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
    """The inverted index finds what comparing every pair finds."""
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
    assert found == every and len(found) > 100


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
        assert answer.json() == {"conflicts": [{
            "memories": [older.id, newer.id], "scope": "project", "type": "preference",
            "reason": "one prefers 'pytest' over 'unittest', the other 'unittest' over "
                      "'pytest'"}]}
        only_facts = server.request("GET", "/api/memory/conflicts", params={"type": "fact"})
        assert only_facts.json() == {"conflicts": []}
