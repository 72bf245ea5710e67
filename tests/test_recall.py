"""Per-prompt recall: gates, the per-session state shared by processes, byte budgets,
freshness, the LLM side query (scripted and real), prefetch and the prompt section."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import CLI, cli_json
from llm_support import ScriptedServer
from memdir import Memdir, build_memory_prompt_section, start_recall_prefetch
from memdir.core.errors import InvalidMemoryError
from memdir.llm.client import LLMSettings
from memdir.retrieval.recall import (
    MAX_MEMORY_BYTES,
    MAX_SESSION_BYTES,
    freshness_warning,
    memory_age,
)


def _deploy_memories(md: Memdir, n: int = 8) -> list[str]:
    return [md.store(f"Deploy step {i}: the deploy pipeline stage number {i} needs care",
                     type="fact").id for i in range(n)]


def test_single_word_prompts_are_skipped(md: Memdir) -> None:
    _deploy_memories(md)
    result = md.recall("deploy", "s1")
    assert result.items == () and result.skipped == "single-word prompt"
    assert md.recall("  deploy  ", "s1").skipped == "single-word prompt"
    assert md.recall("how deploy", "s1").items  # two words: looked up


def test_at_most_five_and_never_twice_in_a_session(md: Memdir) -> None:
    _deploy_memories(md, 8)
    first = md.recall("how does the deploy pipeline work", "s1")
    assert len(first.items) == 5
    second = md.recall("how does the deploy pipeline work", "s1")
    assert len(second.items) == 3
    assert not {m.id for m in first.memories} & {m.id for m in second.memories}
    assert md.recall("how does the deploy pipeline work", "s1").items == ()
    # Another session starts afresh.
    assert len(md.recall("how does the deploy pipeline work", "s2").items) == 5
    assert len(md.recall("the deploy pipeline", "s3", limit=2).items) == 2
    assert len(md.recall("the deploy pipeline", "s4", limit=50).items) == 5


def test_session_state_is_shared_by_separate_processes(cli: CLI) -> None:
    for i in range(8):
        cli("store", "--type", "fact", f"Deploy note {i}: the deploy pipeline stage {i}",
            check=True)
    one = cli_json(cli("recall", "the deploy pipeline stages", "--session", "abc", "--json"))
    two = cli_json(cli("recall", "the deploy pipeline stages", "--session", "abc", "--json"))
    assert isinstance(one, dict) and isinstance(two, dict)
    ids_one = {m["id"] for m in one["memories"]}
    ids_two = {m["id"] for m in two["memories"]}
    assert len(ids_one) == 5 and len(ids_two) == 3 and not ids_one & ids_two
    text = cli("recall", "the deploy pipeline stages", "--session", "abc", check=True)
    assert text.stdout.strip() == ""


def test_concurrent_processes_never_surface_one_memory_twice(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        for i in range(12):
            md.store(f"Cache rule {i}: the cache layer invalidates on write {i}", type="fact")
    code = ("import json, sys; from memdir import Memdir; "
            f"md = Memdir(home={str(home)!r}, project={str(repo)!r}); "
            "r = md.recall('the cache layer invalidates', 'shared', use_llm=False); "
            "print(json.dumps([m.id for m in r.memories]))")

    def run(_: int) -> list[str]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, timeout=60)
        return list(json.loads(out.stdout))

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, range(4)))
    flat = [i for r in results for i in r]
    assert len(flat) == len(set(flat)) == 12  # every memory once, none twice


def test_each_memory_is_cut_at_4kb(md: Memdir) -> None:
    body = "Large runbook about the release train. " + "é" * 5000
    md.store(body, type="procedure")
    item = md.recall("the release train runbook", "s1").items[0]
    assert item.truncated
    kept = item.content.split("\n\n[... truncated")[0]
    assert len(kept.encode("utf-8")) <= MAX_MEMORY_BYTES
    assert len(item.content.encode("utf-8")) <= MAX_MEMORY_BYTES  # the note included
    assert item.content.endswith("[... truncated, memory file too large ...]")


def test_session_stops_receiving_recalls_at_60kb(md: Memdir) -> None:
    for i in range(25):
        md.store(f"Service {i} handbook for the payments platform. " + f"detail{i} " * 400,
                 type="reference")
    total = 0
    rounds = 0
    while True:
        result = md.recall("payments platform handbook", "big")
        rounds += 1
        if not result.items:
            break
        total += sum(len(item.content.encode("utf-8")) for item in result.items)
        assert result.session_bytes == total <= MAX_SESSION_BYTES
        assert rounds < 20
    assert total > MAX_SESSION_BYTES - MAX_MEMORY_BYTES - 200  # it filled the budget
    spent = md.recall("payments platform handbook again", "big")
    assert spent.skipped == "session recall budget spent" or spent.items == ()


@pytest.mark.parametrize(("days", "age", "warned"), [
    (0, "today", False), (1, "yesterday", False), (2, "2 days ago", True),
    (400, "400 days ago", True)])
def test_freshness_text(home: Path, repo: Path, days: int, age: str, warned: bool) -> None:
    stored_at = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
    with Memdir(home=home, project=repo, clock=lambda: stored_at) as md:
        md.store("The flaky test quarantine list lives in ci/quarantine.txt", type="reference")
    later = stored_at + timedelta(days=days, hours=3)
    with Memdir(home=home, project=repo, clock=lambda: later) as md:
        item = md.recall("where is the flaky test quarantine", "s").items[0]
    assert item.days == days and memory_age(days) == age
    assert f"Memory (saved {age}): project/" in item.header
    if warned:
        assert item.header.startswith(f"This memory is {days} days old.")
        assert "Verify against current code" in item.header
        assert freshness_warning(days) in item.text
    else:
        assert freshness_warning(days) == "" and "days old" not in item.text
    assert item.text.startswith("<system-reminder>\n") and item.text.endswith(
        "</system-reminder>")


def test_archived_memories_are_never_recalled(md: Memdir) -> None:
    ids = _deploy_memories(md, 3)
    md.archive(ids[0])
    got = {m.id for m in md.recall("the deploy pipeline stage", "s").memories}
    assert got == set(ids[1:])


def test_bad_arguments(md: Memdir, cli: CLI) -> None:
    with pytest.raises(InvalidMemoryError, match="session id"):
        md.recall("two words", "  ")
    with pytest.raises(InvalidMemoryError, match="limit"):
        md.recall("two words", "s", limit=0)
    missing = cli("recall", "two words")
    assert missing.returncode == 2 and "--session" in missing.stderr


# -- the LLM side query ---------------------------------------------------------------------

def _use_llm(monkeypatch: pytest.MonkeyPatch, base_url: str, model: str = "m",
             timeout: float | None = None) -> None:
    monkeypatch.setenv("MEMDIR_LLM", f"openai:{model}")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    if timeout is not None:
        home = Path(str(__import__("os").environ["MEMDIR_HOME"]))
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(f"[llm]\ntimeout = {timeout}\n")


def _menu(md: Memdir) -> dict[str, str]:
    return {
        "ci": md.store("CI/CD considerations: pipelines run on self-hosted runners",
                       type="decision", name="CI/CD considerations",
                       description="How code gets from a merge to production").file,
        "pg": md.store("PostgreSQL index tuning: use partial indexes on status",
                       type="pitfall", description="Slow queries on the orders table").file,
        "tea": md.store("The team likes green tea", type="fact").file,
    }


def test_side_query_picks_from_the_manifest(md: Memdir, scripted_llm: ScriptedServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    files = _menu(md)
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    answer = {"selected_memories": [files["ci"], "made_up_file.md", files["pg"]]}
    scripted_llm.reply_openai(json.dumps(answer), prompt_tokens=120, completion_tokens=9)
    result = md.recall("what is our deployment process", "s1")
    assert result.method == "llm"
    assert [m.file for m in result.memories] == [files["ci"], files["pg"]]  # made-up dropped
    sent = scripted_llm.requests[0].body
    manifest = sent["messages"][-1]["content"]
    assert "Query: what is our deployment process" in manifest
    assert files["ci"] in manifest and "How code gets from a merge to production" in manifest
    assert "self-hosted runners" not in manifest  # descriptions, never bodies
    usage = md.stats().to_dict()["llm"]
    assert usage["calls_today"] == 1 and usage["input_tokens_today"] == 120
    # What was surfaced is not offered again in this session.
    scripted_llm.reply_openai(json.dumps({"selected_memories": []}))
    md.recall("and the deployment process again", "s1")
    assert files["ci"] not in scripted_llm.requests[1].body["messages"][-1]["content"]


@pytest.mark.parametrize("failure", ["invalid-json", "unknown-shape", "status-500",
                                     "status-429", "timeout"])
def test_side_query_failures_fall_back_to_search(md: Memdir, scripted_llm: ScriptedServer,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 failure: str) -> None:
    files = _menu(md)
    _use_llm(monkeypatch, scripted_llm.url + "/v1", timeout=1.0)
    if failure == "invalid-json":
        scripted_llm.reply_openai("sure! here are the files: ci.md")
    elif failure == "unknown-shape":
        scripted_llm.reply_openai(json.dumps({"files": [files["pg"]]}))
    elif failure == "status-500":
        scripted_llm.reply({"error": "boom"}, status=500)
    elif failure == "status-429":
        scripted_llm.reply({"error": "slow down"}, status=429)
    else:
        scripted_llm.reply_openai(json.dumps({"selected_memories": [files["tea"]]}), delay=3)
    started = time.monotonic()
    result = md.recall("partial indexes for slow PostgreSQL queries", "s1")
    assert time.monotonic() - started < 2.5
    assert result.method == "search"
    assert result.memories and result.memories[0].file == files["pg"]


def test_no_llm_flag_and_unconfigured_llm_use_search(md: Memdir, cli: CLI,
                                                     scripted_llm: ScriptedServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    files = _menu(md)
    assert md.recall("partial indexes on postgresql", "s0").method == "search"
    _use_llm(monkeypatch, scripted_llm.url + "/v1")
    data = cli_json(cli("recall", "partial indexes on postgresql", "--session", "s1",
                        "--no-llm", "--json"))
    assert isinstance(data, dict) and data["method"] == "search"
    assert data["memories"][0]["file"] == files["pg"] and scripted_llm.requests == []


@pytest.mark.llm
def test_side_query_against_the_real_local_model(md: Memdir, local_llm: LLMSettings,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    files = _menu(md)
    _use_llm(monkeypatch, local_llm.base_url, local_llm.model, timeout=60)
    result = md.recall("what is our deployment process", "real")
    # A 135M model's judgement is not asserted; the contract is: a valid answer was used
    # (or the call failed and search took over), and only manifest files come back.
    assert result.method in ("llm", "search")
    assert {m.file for m in result.memories} <= set(files.values())
    usage = md.stats().to_dict()["llm"]
    assert usage["calls_today"] == 1
    if result.method == "llm":
        assert usage["input_tokens_today"] > 0


# -- for agent builders ---------------------------------------------------------------------

def test_prefetch_returns_at_once_and_hands_over_once(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        _deploy_memories(md, 3)
    started = time.monotonic()
    handle = start_recall_prefetch("how does the deploy pipeline work", "p1", home=home,
                                   project=repo)
    assert time.monotonic() - started < 0.2
    assert handle.take() is None or handle.ready()  # never blocks
    assert handle.wait(30)
    result = handle.take()
    assert result is not None and len(result.items) == 3
    assert handle.take() is None  # once and only once
    assert handle.ready()


def test_prefetch_failure_is_an_empty_result(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the home should be")
    handle = start_recall_prefetch("two words", "p", home=blocker / "home", project=tmp_path)
    assert handle.wait(30)
    result = handle.take()
    assert result is not None and result.items == () and handle.error


def test_memory_prompt_section(md: Memdir) -> None:
    md.store("Deployments go through ArgoCD", type="decision")
    text = build_memory_prompt_section(md)
    project = str(md.directory("project").path)
    assert project in text and str(md.directory("user").path) in text
    assert "- **decision**:" in text and "- **summary**" not in text  # system types hidden
    assert "## What NOT to save" in text and "git log" in text
    assert "## Current memory index" in text and "decision_deployments" in text


def test_memory_prompt_section_without_memories(home: Path, repo: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    assert "(No memories saved yet.)" in build_memory_prompt_section()
