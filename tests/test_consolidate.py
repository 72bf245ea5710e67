"""Consolidation: the plan, its reasons, applying it through the write path, nothing lost."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conftest import CLI
from llm_support import ScriptedServer
from memdir import Memdir
from memdir.core.journal import read_journal

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def test_plan_and_apply(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo, clock=lambda: START) as md:
        a = md.store("Deploys go through ArgoCD, never through kubectl apply",
                     type="decision", tags=["deploy"], relevance=0.7)
        b = md.store("Deploys go through ArgoCD, never through kubectl apply by hand",
                     type="decision", tags=["ops"], relevance=0.9)
        weak = md.store("The office coffee machine is on floor 3", type="fact", relevance=0.2)
        loved = md.store("Use UTC in all log lines", type="policy", relevance=0.6)
        for _ in range(3):
            md.update(loved.id, reinforce=True)
        md.store("Kept as is: the API rate limit is 100 per minute", type="fact")
    later = START + timedelta(days=100)
    with Memdir(home=home, project=repo, clock=lambda: later) as md:
        planned = md.consolidate(dry_run=True)
        ops = {op.op: op for op in planned.operations}
        assert set(ops) >= {"merge", "archive", "promote"}
        assert set(ops["merge"].memories) == {a.id, b.id}
        assert weak.id in ops["archive"].memories and "below 0.05" in ops["archive"].reason
        assert ops["promote"].memories == (loved.id,)
        assert ops["promote"].changes["relevance"] == 0.8
        assert not (home / "history.jsonl").exists()  # a dry run writes nothing
        before = sorted(p.name for p in md.directory("project").path.glob("*.md"))
        texts = {p.name: p.read_bytes() for p in md.directory("project").path.glob("*_*.md")}

        applied = md.consolidate(dry_run=False)
        assert applied.applied
        keep, gone = ops["merge"].memories
        merged = md.get(keep)
        assert set(merged.tags) == {"deploy", "ops"} and merged.relevance == 0.9
        assert md.get(gone).status == "archived" and md.get(gone).superseded_by == keep
        assert md.get(weak.id).status == "archived"
        assert md.get(loved.id).relevance == 0.8
        # Nothing deleted: every file is still there.
        assert sorted(p.name for p in md.directory("project").path.glob("*.md")) == before
        history = [json.loads(line) for line in (home / "history.jsonl").read_text()
                   .splitlines()]
        assert [sorted(r) for r in history] == [["at", "begin", "by", "plan"],
                                                ["at", "complete"]]
        journal = read_journal(home / "history" / history[0]["begin"])
        assert {e["file"] for e in journal} >= {md.get(a.id).path.name, md.get(b.id).path.name}
        # Applied again, the plan is empty of what was done.
        again = md.consolidate(dry_run=True)
        assert not [op for op in again.operations if op.op in ("merge", "promote")]
        # Undo puts every file back byte for byte; the log records it and is never rewritten.
        assert md.undo() is not None
        assert {p.name: p.read_bytes() for p in md.directory("project").path.glob("*_*.md")} \
            == texts
        assert md.get(gone).status == "active" and md.get(gone).superseded_by is None
        assert md.get(weak.id).status == "active"
        assert md.get(loved.id).relevance == 0.6
        assert set(md.get(keep).tags) == {"deploy"} or set(md.get(keep).tags) == {"ops"}
        assert [r["undone"] for r in md.history()] == [True]
        assert md.undo() is None
        assert len((home / "history.jsonl").read_text().splitlines()) == 3


def test_relative_dates_left_in_old_files_are_fixed(md: Memdir) -> None:
    memory = md.store("Code freeze from the 3rd", type="project")
    path = memory.path
    assert path is not None
    path.write_text(path.read_text().replace("Code freeze from the 3rd",
                                             "Code freeze starts next Monday"))
    planned = md.consolidate(dry_run=True)
    dates = [op for op in planned.operations if op.op == "dates"]
    assert dates and re.search(r"next Monday \(\d{4}-\d{2}-\d{2}\)$", dates[0].changes["body"])
    md.consolidate(dry_run=False)
    assert md.get(memory.id).body == dates[0].changes["body"]


def _sessions(md: Memdir, tmp: Path, count: int) -> None:
    for n in range(count):
        path = tmp / f"s{n}.json"
        path.write_text(json.dumps([{"role": "user", "content": f"session {n} talk"}]))
        md.index_session(path, f"s{n}")


def test_dream_gates_and_lock(md: Memdir, tmp_path: Path) -> None:
    import os
    import time

    from memdir.upkeep.dream import LOCK_FILE, gates

    due, why = gates(md)
    assert not due and "0 sessions" in why
    _sessions(md, tmp_path, 5)
    due, why = gates(md)
    assert due and "5 sessions" in why
    result = md.dream()
    assert result.ran
    lock = md.home / LOCK_FILE
    assert abs(lock.stat().st_mtime - time.time()) < 60
    again = md.dream()
    assert not again.ran and "h ago" in again.reason  # the 24-hour gate
    # A lock left by a dead process is taken over; a live holder is respected.
    day_ago = time.time() - 25 * 3600
    lock.write_text("999999999")
    os.utime(lock, (day_ago, day_ago))
    for path in tmp_path.glob("s*.json"):
        os.utime(path, None)  # sessions newer than the last dream
    assert md.dream().ran
    lock.write_text(str(os.getppid()))  # alive
    recent = time.time() - 60
    os.utime(lock, (recent, recent))
    forced = md.dream(force=True)
    assert not forced.ran and "lock" in forced.reason


def test_cli_consolidate_and_dream(cli: CLI, md: Memdir) -> None:
    run = cli
    md.store("Deploys go through ArgoCD, never through kubectl apply", type="decision")
    md.store("Deploys go through ArgoCD, never through kubectl apply by hand", type="decision")
    plan = run("consolidate", check=True).stdout
    assert plan.startswith("plan: 1 operation (apply with --yes)") and "merge" in plan
    applied = run("consolidate", "--yes", check=True).stdout
    assert applied.startswith("applied: 1 operation")
    assert "1 operations" in run("history", check=True).stdout
    assert run("undo", check=True).stdout.startswith("undid the plan applied at")
    assert "(undone)" in run("history", check=True).stdout
    assert "no dream" in run("dream", check=True).stdout
    assert "dreamt" in run("dream", "--force", check=True).stdout


def test_daily_logs_are_appended_and_gathered(md: Memdir) -> None:
    import threading

    first = md.log("Deployed 4.2 to production; the orders migration took 12 minutes")
    md.log("We must never run migrations during business hours <private>pager 555</private>")
    assert first.parent.parent.parent.name == "logs" and first.name.endswith(".md")
    # Concurrent appenders never tear a line.
    threads = [threading.Thread(target=lambda n=n: [md.log(f"writer {n} line {i}")
                                                    for i in range(20)]) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = first.read_text().splitlines()
    assert len(lines) == 82 and all(line.startswith("- ") for line in lines)
    assert "pager" not in first.read_text()
    with pytest.raises(Exception, match="secret"):
        md.log("token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    original = first.read_text()
    applied = md.consolidate(dry_run=False)
    gathers = [op for op in applied.operations if op.op == "gather"]
    assert len(gathers) == 1 and "82 new lines" in gathers[0].reason
    assert first.read_text() == original  # the log is never edited
    bodies = [m.body for m in md.list()]
    assert any(b.startswith("Log of ") and "orders migration" in b for b in bodies)
    assert any("never run migrations during business hours" in b.lower() for b in bodies)
    assert not [op for op in md.consolidate().operations if op.op == "gather"]  # consumed
    md.log("One more thing after the gathering")
    again = [op for op in md.consolidate().operations if op.op == "gather"]
    assert len(again) == 1 and "1 new lines" in again[0].reason
    assert md.directory("project").path.joinpath(first.name).exists() is False
    assert md.doctor() == [] or all(p.kind != "broken" for p in md.doctor())


def test_decay_halves_in_90_days_and_reinforcement_resets_it(home: Path, repo: Path) -> None:
    from memdir.retrieval.search import strength

    with Memdir(home=home, project=repo, clock=lambda: START) as md:
        memory = md.store("Releases are cut from the release branch", type="fact",
                          relevance=0.8)
        tax = md.directory("project").taxonomy
        fresh = strength(md.list()[0], tax, START)
    later = START + timedelta(days=90)
    with Memdir(home=home, project=repo, clock=lambda: later) as md:
        aged = strength(md.list()[0], tax, later)
        assert aged == pytest.approx(fresh / 2, rel=1e-6)
        md.update(memory.id, reinforce=True)  # explicit reinforcement resets the decay
        renewed = strength(md.list()[0], tax, later)
        assert renewed > fresh  # undecayed again, and one reinforcement stronger
        stats = md.stats().to_dict()
        assert sum(stats["strength"].values()) == 1 and stats["last_dream"] is None
    much_later = START + timedelta(days=900)
    with Memdir(home=home, project=repo, clock=lambda: much_later) as md:
        ops = md.consolidate().operations
        assert [op.op for op in ops] == ["archive"]
        assert md.stats().to_dict()["strength"]["< 0.05 (archived by consolidation)"] == 1


def test_two_dreams_at_once_run_exactly_one(md: Memdir, home: Path, repo: Path) -> None:
    import os
    import subprocess
    import sys

    md.store("Deploys go through ArgoCD, never through kubectl apply", type="decision")
    env = {**os.environ, "MEMDIR_HOME": str(home)}
    procs = [subprocess.Popen([sys.executable, "-m", "memdir", "dream", "--force", "--json"],
                              cwd=repo, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    ran = [r["ran"] for r in results]
    # A dream takes milliseconds here, so the two may also run one after the other; what
    # must never happen is two holding the lock at once (checked below with holders that
    # keep it), and a loser of the race reports the lock.
    assert ran.count(True) >= 1
    if ran.count(True) == 1:
        assert "lock" in next(r["reason"] for r in results if not r["ran"])
    assert md.stats().to_dict()["last_dream"] is not None
    (home / ".consolidate-lock").unlink()
    code = ("import sys, time; from pathlib import Path; from memdir.upkeep.dream import _acquire; "
            "print(_acquire(Path(sys.argv[1]), time.time()), flush=True); time.sleep(3)")
    racers = [subprocess.Popen([sys.executable, "-c", code, str(home)],
                               stdout=subprocess.PIPE, text=True) for _ in range(4)]
    won = [p.communicate(timeout=60)[0].strip() for p in racers]
    assert won.count("True") == 1, won  # four processes at once: exactly one holds it


def test_the_lock_with_real_processes(md: Memdir, home: Path, repo: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from memdir.upkeep.dream import LOCK_FILE

    md.store("Deploys go through ArgoCD, never through kubectl apply", type="decision")
    env = {**os.environ, "MEMDIR_HOME": str(home)}
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from memdir.upkeep.dream import _acquire; "
         "print(_acquire(Path(sys.argv[1]), time.time()), flush=True); time.sleep(60)",
         str(home)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        assert (home / LOCK_FILE).read_text() == str(holder.pid)

        def dream() -> dict[str, object]:
            out = subprocess.run([sys.executable, "-m", "memdir", "dream", "--force", "--json"],
                                 cwd=repo, env=env, capture_output=True, text=True, timeout=120)
            return dict(json.loads(out.stdout))

        held = dream()  # a fresh lock of a live process is respected
        assert held["ran"] is False and "lock" in str(held["reason"])
        holder.send_signal(signal.SIGKILL)  # the holder dies without releasing it
        holder.wait(10)
        time.sleep(0.1)
        taken = dream()  # a dead holder's lock is taken over
        assert taken["ran"] is True
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()


def _postgres_pair(home: Path, repo: Path) -> tuple[str, str]:
    """An older and a newer memory that disagree (other numbers): a conflict by the rules."""
    with Memdir(home=home, project=repo, clock=lambda: START) as md:
        old = md.store("The staging database runs Postgres 15", type="fact")
    with Memdir(home=home, project=repo, clock=lambda: START + timedelta(days=1)) as md:
        new = md.store("The staging database runs Postgres 16", type="fact")
    return old.id, new.id


def _with_scripted_llm(monkeypatch: pytest.MonkeyPatch, scripted_llm: ScriptedServer) -> None:
    monkeypatch.setenv("MEMDIR_LLM", "openai:m")
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_llm.url + "/v1")


def test_with_an_llm_wording_is_merged_and_the_newer_supersedes_when_the_model_says_so(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch,
        scripted_llm: ScriptedServer) -> None:
    _with_scripted_llm(monkeypatch, scripted_llm)
    with Memdir(home=home, project=repo, clock=lambda: START) as md:
        md.store("Deploys go through ArgoCD, never through kubectl apply", type="decision")
        md.store("Deploys go through ArgoCD, never through kubectl apply by hand",
                 type="decision")
    old, new = _postgres_pair(home, repo)
    with Memdir(home=home, project=repo, clock=lambda: START + timedelta(days=2)) as md:
        planned = md.consolidate(dry_run=True, use_llm=False)  # the rules alone: a conflict
        assert [(op.op, op.memories) for op in planned.conflicts] == [("conflict", (old, new))]
        scripted_llm.reply_openai(json.dumps(
            {"content": "Deploys go through ArgoCD; never kubectl apply, not even by hand"}))
        scripted_llm.reply_openai(json.dumps({"contradictions": [
            {"pair": 1, "newer_replaces_older": True,
             "reason": "staging was upgraded from Postgres 15 to 16"}]}))
        applied = md.consolidate(dry_run=False)
        kinds = {op.op: op for op in applied.operations}
        assert set(kinds) == {"merge", "supersede"}  # the conflict is resolved, not reported
        assert "wording merged by the LLM" in kinds["merge"].reason
        assert kinds["supersede"].memories == (old, new)
        assert kinds["supersede"].reason == (f"the LLM says the newer {new} replaces it: "
                                             "staging was upgraded from Postgres 15 to 16")
        keep = kinds["merge"].memories[0]
        assert md.get(keep).body == "Deploys go through ArgoCD; never kubectl apply, not " \
                                    "even by hand"
        assert md.get(old).status == "archived" and md.get(old).superseded_by == new
        assert md.get(new).status == "active"
        assert len(scripted_llm.requests) == 2
        asked = json.dumps(scripted_llm.requests[1].body)
        assert json.dumps("1. A: The staging database runs Postgres 15\n   B: The staging "
                          "database runs Postgres 16")[1:-1] in asked  # older first


@pytest.mark.parametrize(("answer", "note"), [
    ({"contradictions": []}, "; the LLM found no contradiction: check them"),
    ({"contradictions": [{"pair": 1, "newer_replaces_older": False,
                          "reason": "both run, on different hosts"}]},
     "; the LLM says they contradict and the newer does not replace the older: both run, "
     "on different hosts"),
    ("no idea", ""),  # garbage: the rules' plan as it was
    ({"contradictions": [1]}, ""),  # not the asked shape: unusable too
    ({"contradictions": [{"pair": 1, "newer_replaces_older": True}]}, ""),  # no reason
], ids=["no", "contradict-but-keep-both", "garbage", "old-shape", "no-reason"])
def test_with_an_llm_a_conflict_stays_reported_unless_the_model_says_the_newer_wins(
        home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch,
        scripted_llm: ScriptedServer, answer: object, note: str) -> None:
    _with_scripted_llm(monkeypatch, scripted_llm)
    old, new = _postgres_pair(home, repo)
    with Memdir(home=home, project=repo, clock=lambda: START + timedelta(days=2)) as md:
        scripted_llm.reply_openai(answer if isinstance(answer, str) else json.dumps(answer))
        applied = md.consolidate(dry_run=False)
        assert len(scripted_llm.requests) == 1
        assert [(op.op, op.memories, op.reason) for op in applied.operations] == [
            ("conflict", (old, new), "they disagree: other numbers: 15 in one, 16 in the other"
             + note)]
        assert md.get(old).status == md.get(new).status == "active"
        assert not (home / "history.jsonl").exists()  # a plan of conflicts changes nothing


def test_a_failed_dream_releases_the_lock_and_keeps_the_last_run(md: Memdir) -> None:
    import os
    import shutil

    from memdir.upkeep.dream import LOCK_FILE, last_dream

    md.store("Deploys go through ArgoCD", type="decision")
    assert md.dream(force=True).ran
    earlier = last_dream(md.home) - 3600
    os.utime(md.home / LOCK_FILE, (earlier, earlier))
    index = md.directory("project").path / "MEMORY.md"
    index.unlink()
    index.mkdir()  # MEMORY.md cannot be written: the dream fails part-way
    try:
        with pytest.raises(OSError):
            md.dream(force=True)
        assert (md.home / LOCK_FILE).read_text() == "0"  # released
        assert last_dream(md.home) == pytest.approx(earlier)  # not counted as a run
    finally:
        shutil.rmtree(index)


@pytest.mark.parametrize("relevance", [0.3, 0.8])
def test_a_memory_never_used_is_archived_at_the_age_the_seeds_give(
        home: Path, repo: Path, relevance: float) -> None:
    """Seed 002: archived when type weight × relevance × decay falls below 0.1 (its usage
    factor is 1 for a memory never used); the bounded boost must not archive it sooner."""
    import math

    with Memdir(home=home, project=repo, clock=lambda: START) as md:
        memory = md.store("The build cache lives on the shared volume", type="fact",
                          relevance=relevance)
        weight = md.directory("project").taxonomy.get("fact").weight
    days = 90 * math.log2(weight * relevance / 0.1)  # when the seed's strength reaches 0.1
    for offset, archived in ((-3, False), (3, True)):
        at = START + timedelta(days=days + offset)
        with Memdir(home=home, project=repo, clock=lambda at=at: at) as md:
            ops = md.consolidate(dry_run=True).operations
            assert any(memory.id in op.memories for op in ops if op.op == "archive") \
                is archived, (days, offset)


def test_a_dream_counts_changes_not_reported_conflicts(md: Memdir) -> None:
    """A conflict changes nothing, so the dream's "N operations" leaves it out."""
    md.store("I prefer pnpm over npm", type="preference")
    md.store("I prefer npm over pnpm", type="preference")
    assert [op.op for op in md.consolidate(dry_run=True).operations] == ["conflict"]
    result = md.dream(force=True)
    assert result.ran and result.operations == 0
    assert len(md.list()) == 2
