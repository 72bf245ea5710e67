"""Conflicts, merges and warnings on whole stores (issue 28), at small scale.

The stores a user keeps: many memories from one template (one per service, each with a copy
that has one more "the"), and a real contradiction planted among them. Through the real
CLI, the library, MCP and the HTTP server: no false conflict between two services, every
"the" copy merged, the planted pair reported at store time with both ids and both kept;
listings bounded with the total; the candidate pairs bounded per memory (never all pairs);
the dream within its budget. The pair rules themselves: tests/test_conflicts.py and
tests/test_merge_pairs.py; 10k / 20k timings: bench/conflicts_scale.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import CLI, cli_json
from memdir import Memdir
from memdir.agents.mcp_server import build_server
from memdir.upkeep import dream as dream_module
from memdir.upkeep.candidates import NEIGHBOURS, skeletons, word_neighbours
from memdir.upkeep.conflicts import claim_of, conflict, conflicting_pairs, content_keys
from memdir.upkeep.slots import slots

SERVICES = 40


def _fact(n: int, port: int | None = None, the: bool = False) -> str:
    where = "in the the staging cluster" if the else "in the staging cluster"
    return f"The service number {n} listens on port {port or 8000 + n} {where}"


def _templated(md: Memdir) -> list[str]:
    ids = []
    for n in range(1, SERVICES + 1):
        ids.append(md.store(_fact(n), type="project").id)
        ids.append(md.store(_fact(n, the=True), type="project").id)
    return ids


def test_a_templated_store_has_no_conflicts_and_merges_every_copy(
        md: Memdir, cli: CLI) -> None:
    _templated(md)
    plan = cli_json(cli("consolidate", "--dry-run", "--json", "--limit", "0"))
    assert isinstance(plan, dict)
    assert plan["totals"].get("conflict", 0) == 0
    merges = [op for op in plan["operations"] if op["op"] == "merge"]
    assert plan["totals"]["merge"] == len(merges) == SERVICES
    bodies = {m.id: m.body for m in md.list()}
    for op in merges:  # each merge joins one service's two wordings, never two services
        numbers = {bodies[i].split()[3] for i in op["memories"]}
        assert len(op["memories"]) == 2 and len(numbers) == 1, op
    doctor = cli_json(cli("doctor", "--json"))
    assert isinstance(doctor, list)
    assert [p for p in doctor if p["kind"] == "memory-conflict"] == []


def test_a_planted_contradiction_is_warned_at_store_time_and_both_are_kept(
        md: Memdir, cli: CLI) -> None:
    _templated(md)
    kept = next(m for m in md.list() if m.body == _fact(5))
    result = cli("store", "--type", "reference", "--json", _fact(5, port=9999))
    data = cli_json(result)
    assert isinstance(data, dict)
    new = data["memory"]["id"]
    warned = {c["id"] for c in data["conflicts"]}
    assert kept.id in warned and len(warned) <= 2  # the fact (and its "the" copy)
    assert f"memory {new} may contradict project memory" in result.stderr
    assert kept.id in result.stderr and "both are kept" in result.stderr
    assert md.get(new).status == md.get(kept.id).status == "active"
    # A neighbouring service, another port: a different subject, no warning.
    other = cli_json(cli("store", "--type", "project", "--json", _fact(SERVICES + 1)))
    assert isinstance(other, dict) and other["conflicts"] == []
    # The plan reports the planted pair, and only it.
    plan = md.consolidate(dry_run=True)
    pairs = {frozenset(op.memories) for op in plan.conflicts}
    assert pairs and all(new in pair for pair in pairs)
    assert frozenset((kept.id, new)) in pairs


def test_the_library_warns_across_scopes_and_types(md: Memdir) -> None:
    project = md.store("The auth service is written in Go.", type="project")
    mine = md.store("The auth service is written in Rust.", type="user", scope="user")
    assert [m.id for m in md.conflicts(mine)] == [project.id]
    assert [m.id for m in md.conflicts(project)] == [mine.id]
    admin = md.store("The admin API rate limit is 1000 requests per minute", type="project")
    api = md.store("The API rate limit is 100 requests per minute", type="project")
    assert md.conflicts(api) == [] and md.conflicts(admin) == []  # two subjects
    logs = md.store("Production logs go to Datadog", type="reference")
    loki = md.store("Production logs go to Grafana Loki", type="feedback", scope="user")
    assert [m.id for m in md.conflicts(loki)] == [logs.id]


def test_mcp_and_http_results_name_both_memories(md: Memdir, home: Path, repo: Path) -> None:
    from server_support import running_server

    kept = md.store("Merges to main need two approvals", type="project")
    out: dict[str, Any] = {}

    async def main() -> None:
        async with Client(build_server(md=md), read_timeout_seconds=30) as client:
            clash = await client.call_tool("memory_learn", {
                "content": "Merges to main need three approvals", "type": "feedback"})
            out.update(clash=clash.structured_content)

    anyio.run(main)
    assert [c["id"] for c in out["clash"]["conflicts"]] == [kept.id]
    assert out["clash"]["memory"]["id"] != kept.id

    with running_server(home, repo) as server:
        answer = server.request("POST", "/api/memory/store", json={
            "content": "Merges to main need 5 approvals", "type": "project"})
        assert answer.status_code == 201, answer.text
        body = answer.json()
        assert kept.id in {c["id"] for c in body["conflicts"]}
        assert body["memory"]["id"] not in {c["id"] for c in body["conflicts"]}


def _many_conflicts(md: Memdir, n: int) -> None:
    for i in range(n):
        md.store(f"The {_name(i)} worker retries failed jobs 3 times", type="project")
        md.store(f"The {_name(i)} worker retries failed jobs 7 times", type="project")


def _name(i: int) -> str:
    return "".join("abcdefghij"[int(d)] for d in f"{i:03d}") + "-queue-runner"


def test_listings_show_a_bounded_page_and_the_total(md: Memdir, cli: CLI, home: Path,
                                                    repo: Path) -> None:
    from server_support import running_server

    _many_conflicts(md, 25)
    text = cli("consolidate", "--dry-run", check=True).stdout
    assert "25 conflicts: never merged or archived by rules" in text
    assert text.count("  conflict ") == 20 and "... and 5 more (--limit 0 lists all)" in text
    plan = cli_json(cli("consolidate", "--dry-run", "--json", "--limit", "3"))
    assert isinstance(plan, dict) and plan["totals"]["conflict"] == 25
    assert len([op for op in plan["operations"] if op["op"] == "conflict"]) == 3
    doctor = cli_json(cli("doctor", "--json"))
    assert isinstance(doctor, list)
    notices = [p for p in doctor if p["kind"] == "memory-conflict"]
    assert len(notices) == 21 and "5 more conflicts not listed here (25 in all)" in \
        notices[-1]["message"]
    with running_server(home, repo) as server:
        page = server.request("GET", "/api/memory/conflicts", params={"limit": 10,
                                                                       "offset": 20}).json()
        assert page["total"] == 25 and len(page["conflicts"]) == 5

    async def main() -> dict[str, Any]:
        async with Client(build_server(md=md), read_timeout_seconds=60) as client:
            found = await client.call_tool("memory_consolidate", {"dry_run": True})
            assert isinstance(found.structured_content, dict)
            return found.structured_content

    mcp_plan = anyio.run(main)
    assert mcp_plan["totals"]["conflict"] == 25
    assert len([op for op in mcp_plan["operations"] if op["op"] == "conflict"]) == 20


def test_candidate_pairs_are_bounded_per_memory_not_all_pairs() -> None:
    """600 facts from one template (and a "the" copy of each): the skeleton index pairs no
    two services (subject and port differ: two stretches) and no copy with its original (the
    same slots: the merge rule's, not a conflict), the rare-word index at most NEIGHBOURS per
    memory; comparing every pair would be 1,200 × 1,199 / 2 = 719,400."""
    texts = [_fact(n) for n in range(1, 601)] + [_fact(n, the=True) for n in range(1, 601)]
    claims = [[s.key for s in slots(claim_of(t))] for t in texts]
    index = skeletons(claims)
    assert index.pairs == frozenset()
    planted = skeletons([*claims, [s.key for s in slots(_fact(5, port=9999))]])
    assert planted.pairs == {(4, 1200), (604, 1200)}  # service 5, both wordings
    near = word_neighbours([content_keys(claim_of(t)) for t in texts])
    assert len(near) <= NEIGHBOURS * len(texts)
    assert not [p for p in near if conflict(texts[p[0]], texts[p[1]])]


def test_a_list_is_not_a_conflict() -> None:
    """One subject given more than FANOUT values in the store is a list (Priya owns five
    services; the worker reads five variables), not five conflicting values; two values are
    a conflict."""
    from memdir.core.model import Memory

    def memories(values: list[str]) -> list[Memory]:
        return [Memory(id=f"m{n}", name=v, description=v, type="project", scope="project",
                       body=f"The payments worker reads its settings from {v}")
                for n, v in enumerate(values)]

    many = memories([f"`{name}.toml`" for name in ("app", "db", "cache", "queue", "auth")])
    assert conflicting_pairs(many) == []
    two = memories(["`settings.toml`", "`settings.yaml`"])
    assert len(conflicting_pairs(two)) == 1


def test_the_dream_stays_within_its_budget(md: Memdir, monkeypatch: pytest.MonkeyPatch,
                                           home: Path) -> None:
    from memdir.upkeep.history import history

    for n in range(6):  # six near-duplicate pairs: six merges
        md.store(f"Deploys of the {_name(n)} go through ArgoCD", type="decision")
        md.store(f"Deploys of the {_name(n)} always go through ArgoCD", type="decision")
    before = {m.id: m.status for m in md.list(status="all")}
    monkeypatch.setattr(dream_module, "BUDGET_SECONDS", 0.0)
    with pytest.raises(TimeoutError, match="longer than 0 s"):
        md.dream(force=True)
    assert {m.id: m.status for m in md.list(status="all")} == before  # nothing applied
    assert history(home) == []
    monkeypatch.setattr(dream_module, "BUDGET_SECONDS", 120.0)
    monkeypatch.setattr(dream_module, "MAX_CHANGES", 2)
    assert md.dream(force=True).ran
    [record] = history(home)
    merged = [op for op in record["plan"]["operations"] if op["op"] == "merge"]
    assert len(merged) == 2
    assert sum(m.status == "archived" for m in md.list(status="all")) == 2
    assert json.dumps(record)  # the history stays plain JSON


def test_the_last_scan_is_remembered_for_exactly_the_same_memories(
        md: Memdir, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memdir.upkeep import conflict_scan

    kept = md.store(_fact(5), type="project")
    other = md.store(_fact(5, port=9999), type="project")
    first = conflict_scan.scan(home, md.list())
    assert [(c.older.id, c.newer.id) for c in first] in ([(kept.id, other.id)],
                                                         [(other.id, kept.id)])
    saved = json.loads((home / conflict_scan.FILE).read_text())
    assert saved["rules"] == conflict_scan.RULES and len(saved["conflicts"]) == 1

    def no_scan(*args: object, **kwargs: object) -> list[object]:
        raise AssertionError("scanned again")

    monkeypatch.setattr(conflict_scan, "conflicting_pairs", no_scan)
    again = conflict_scan.scan(home, list(reversed(md.list())))  # any order: the same set
    assert [(c.older.id, c.newer.id, c.reason) for c in again] == \
        [(c.older.id, c.newer.id, c.reason) for c in first]
    md.update(other.id, content=_fact(5, port=8005))  # one memory changed: scanned again
    with pytest.raises(AssertionError, match="scanned again"):
        conflict_scan.scan(home, md.list())
    monkeypatch.undo()
    assert conflict_scan.scan(home, md.list()) == []
    # What is not a scan of these memories is never believed: garbage, a symlink, a pair
    # naming a memory that is not there.
    for bad in ("not json", json.dumps({"digest": "x", "conflicts": []})):
        (home / conflict_scan.FILE).write_text(bad)
        assert conflict_scan.scan(home, md.list()) == []
    (home / conflict_scan.FILE).unlink()
    target = home / "elsewhere.json"
    target.write_text(json.dumps(saved))
    (home / conflict_scan.FILE).symlink_to(target)
    assert conflict_scan.scan(home, md.list()) == []
    assert json.loads(target.read_text()) == saved  # the link's target is never written


def test_doctor_reuses_the_plans_scan(md: Memdir, cli: CLI, home: Path) -> None:
    from memdir.upkeep import conflict_scan

    md.store(_fact(7), type="project")
    md.store(_fact(7, port=9999), type="project")
    cli("consolidate", "--dry-run", check=True)
    stamp = (home / conflict_scan.FILE).stat().st_mtime_ns
    doctor = cli_json(cli("doctor", "--json"))
    assert isinstance(doctor, list)
    assert len([p for p in doctor if p["kind"] == "memory-conflict"]) == 1
    assert (home / conflict_scan.FILE).stat().st_mtime_ns == stamp  # read, not rewritten
