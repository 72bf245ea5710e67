"""Hybrid search with the local embedding model, its fallback without the extra, vectors kept
in step with the files (by the background worker: searches never embed memories, see
tests/test_vector_worker.py), and the warm daemon that hooks ask."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CLI, cli_json
from hook_support import wait_until
from memdir import Memdir
from memdir.agents.daemon import ask, socket_path

DEPLOY = "CI/CD considerations: pipelines run on self-hosted runners"


def _store(md: Memdir) -> dict[str, str]:
    return {
        "ci": md.store(DEPLOY, type="decision").id,
        "cake": md.store("The chocolate cake recipe uses dark cocoa", type="fact").id,
        "pg": md.store("PostgreSQL index tuning: partial indexes on status", type="pitfall").id,
    }


def test_semantic_is_on_by_default_with_the_extra(home: Path, repo: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMDIR_SEMANTIC")
    with Memdir(home=home, project=repo) as md:
        assert md.semantic and md.embedder is not None


def test_hybrid_finds_meaning_that_words_miss(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo, sync_interval=0, semantic=True) as md:
        ids = _store(md)
        assert md.search("what is our deployment process", mode="fts") == []
        assert md.wait_for_vectors(120)  # the background worker embeds them
        hits = md.search("what is our deployment process")
        assert hits and hits[0].memory.id == ids["ci"]
        assert ids["cake"] not in {h.memory.id for h in hits}  # below the similarity floor
        slow = md.search("database performance problems")
        assert slow[0].memory.id == ids["pg"]
        # Exact words still count: BM25 and the vectors agree on this one.
        assert md.search("chocolate cake")[0].memory.id == ids["cake"]
        # Filters apply to the semantic candidates too.
        assert md.search("what is our deployment process", types=["fact"]) == []
        assert md.recall("what is our deployment process?", "s1").memories[0].id == ids["ci"]


def test_semantic_can_be_turned_off(home: Path, repo: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with Memdir(home=home, project=repo, semantic=False) as md:
        _store(md)
        assert not md.semantic and md.embedder is None
        assert md.search("what is our deployment process", mode="hybrid") == []
    monkeypatch.setenv("MEMDIR_SEMANTIC", "0")
    with Memdir(home=home, project=repo) as md:  # the environment turns the default off
        assert not md.semantic
        assert md.search("what is our deployment process") == []


def test_without_the_extra_search_is_fts_and_nothing_fails(home: Path, repo: Path) -> None:
    code = f"""
import sys
sys.modules["onnxruntime"] = None  # as if the extra were not installed
from memdir import Memdir
md = Memdir(home={str(home)!r}, project={str(repo)!r}, semantic=True)
md.store({DEPLOY!r}, type="decision")
assert md.semantic is False and md.embedder is None
assert md.search("what is our deployment process", mode="hybrid") == []
assert [h.memory.body for h in md.search("pipelines runners")] == [{DEPLOY!r}]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _vectors(md: Memdir) -> int:
    return int(md.index.conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])


def test_the_worker_embeds_new_memories_after_writes(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo, sync_interval=0, semantic=True) as md:
        _store(md)
        md.search("release pipelines")  # loads the model if needed, and wakes the worker
        assert md.wait_for_vectors(120) and _vectors(md) == 3
        md.store("Kubernetes rollouts wait for the readiness probe", type="fact")
        assert md.wait_for_vectors(120) and _vectors(md) == 4  # no search needed
        md.store_many([{"content": f"Service {n} listens on port {8000 + n}", "type": "fact"}
                       for n in range(5)])
        assert md.wait_for_vectors(120) and _vectors(md) == 9
    with Memdir(home=home, project=repo, sync_interval=0, semantic=False) as md:
        md.store("Words-only processes never load the model", type="fact")
        assert _vectors(md) == 9


def _seqs(md: Memdir) -> dict[str, int]:
    return {r[0]: r[1] for r in md.index.conn.execute("SELECT file, seq FROM embeddings")}


def test_vectors_follow_the_files(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo, sync_interval=0, semantic=True) as md:
        ids = _store(md)
        md.embed_memories()  # reindex --embeddings: now, on this thread (the worker may help)
        assert _vectors(md) == 3
        assert md.embed_memories() == 0  # nothing stale
        assert md.wait_for_vectors(120)  # nor anything the worker still had in hand
        before = _seqs(md)
        memory = md.get(ids["cake"])
        assert memory.path is not None
        memory.path.write_text(memory.path.read_text().replace(
            "The chocolate cake recipe uses dark cocoa",
            "Release trains leave every second Tuesday"))
        md.reconcile()  # picks the edit up and wakes the worker
        assert md.wait_for_vectors(120)
        after = _seqs(md)
        changed = {file for file in before if after[file] != before[file]}
        assert changed == {memory.path.name}  # the edited one only
        assert md.search("when do releases ship")[0].memory.id == ids["cake"]
        md.delete(ids["pg"])
        assert md.wait_for_vectors(120)
        count = md.index.conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        assert count == 2


def test_cli_reindex_embeddings_and_hybrid_search(cli: CLI) -> None:
    cli("store", "--type", "decision", DEPLOY, check=True)
    out = cli("reindex", "--embeddings", check=True).stdout
    assert out.startswith("reindexed 1 files")
    assert "no memories match" in cli("search", "what is our deployment process").stdout
    data = cli_json(cli("search", "what is our deployment process", "--hybrid", "--json"))
    assert isinstance(data, list) and data[0]["memory"]["content"] == DEPLOY





def test_hooks_ask_the_warm_daemon(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo, semantic=True) as md:
        _store(md)
        md.embed_memories()  # as `memdir reindex --embeddings` would
    env = {**os.environ, "MEMDIR_HOME": str(home)}
    daemon = subprocess.Popen([sys.executable, "-m", "memdir", "daemon", "--idle", "60"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # The daemon loads the model in the background (FTS answers meanwhile): wait for it.
        assert wait_until(lambda: (ask(home, {"op": "ping"}) or {}).get("model") is True, 60), \
            "the daemon did not start, or did not load the model"
        payload = {"session_id": "d1", "cwd": str(repo),
                   "prompt": "what is our deployment process?"}
        result = subprocess.run([sys.executable, "-m", "memdir", "hook", "prompt"],
                                input=json.dumps(payload), capture_output=True, text=True,
                                env=env, cwd=repo, timeout=60)
        assert result.returncode == 0 and DEPLOY in result.stdout
        again = subprocess.run([sys.executable, "-m", "memdir", "hook", "prompt"],
                               input=json.dumps(payload), capture_output=True, text=True,
                               env=env, cwd=repo, timeout=60)
        assert again.returncode == 0 and DEPLOY not in again.stdout  # once per session
        bad = ask(home, {"op": "nope"})
        assert bad is not None and bad["ok"] is False and "hint" in bad
        # A home made again after a deletion can get the inode (so the socket) of this one:
        # the daemon answers only for the home it serves.
        other = home.parent / "other-home"
        other.mkdir()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10)
            conn.connect(str(socket_path(home)))
            conn.sendall(json.dumps({"op": "recall", "home": str(other), "project": str(repo),
                                     "prompt": "what is our deployment process?",
                                     "session_id": "d9"}).encode() + b"\n")
            refused = json.loads(conn.makefile().readline())
        assert refused["ok"] is False and "serves" in refused["error"] and "text" not in refused
    finally:
        daemon.terminate()
        daemon.wait(10)


def test_a_daemon_starts_on_demand_and_leaves_when_idle(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        _store(md)
    env = {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_DAEMON": "1"}
    payload = {"session_id": "d2", "cwd": str(repo), "prompt": "what is our deployment process?"}
    first = subprocess.run([sys.executable, "-m", "memdir", "hook", "prompt"],
                           input=json.dumps(payload), capture_output=True, text=True, env=env,
                           cwd=repo, timeout=60)
    assert first.returncode == 0 and DEPLOY not in first.stdout  # FTS in the hook itself
    assert wait_until(lambda: ask(home, {"op": "ping"}) is not None, 30), "no daemon was started"
    pid = ask(home, {"op": "ping"})["pid"]  # type: ignore[index]
    os.kill(pid, 15)
    assert wait_until(lambda: not socket_path(home).exists(), 10)
    idle = subprocess.Popen([sys.executable, "-m", "memdir", "daemon", "--idle", "1"], env=env)
    assert idle.wait(60) == 0  # nothing asked: it leaves by itself
    assert not socket_path(home).exists()


def test_a_match_whose_vector_is_not_computed_yet_still_ranks(home: Path, repo: Path) -> None:
    # Whether the worker has reached them or not (tests/test_vector_worker.py holds it back
    # for certain), the exact match ranks first.
    with Memdir(home=home, project=repo, sync_interval=0, semantic=True) as md:
        ids = _store(md)
        md.store_many([{"content": f"Chocolate fact {n}: cocoa beans grow on trees",
                        "type": "fact"} for n in range(3)])
        hits = md.search("chocolate cake recipe dark cocoa")
        assert hits[0].memory.id == ids["cake"]
        words = {h.memory.id: h.match for h in md.search("chocolate cake recipe dark cocoa",
                                                         mode="fts", touch=False)}
        embedded = {r[0] for r in md.index.conn.execute("SELECT file FROM embeddings")}
        # Those still without a vector (none, some or all: the worker runs meanwhile) are
        # matched on their words alone.
        unembedded = [h for h in hits if h.memory.path and h.memory.path.name not in embedded]
        assert all(h.match == pytest.approx(words[h.memory.id]) for h in unembedded)
        assert {h.memory.id for h in hits} >= {ids["cake"]}
        assert all(0.0 <= h.match <= 1.0 for h in hits)


def test_hybrid_filters_words_and_neighbours_alike(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo, sync_interval=0, semantic=True) as md:
        api = md.store("Deployments of the API go through the blue-green pipeline",
                       type="procedure", tags=["api"], paths=["services/api/**"]).id
        web = md.store("Deployments of the web app go through the canary pipeline",
                       type="procedure", tags=["web"], paths=["apps/web/**"]).id
        ci = md.store(DEPLOY, type="decision", tags=["ci"]).id
        assert md.wait_for_vectors(120)  # the neighbours need their vectors
        everything = {h.memory.id for h in md.search("how do we deploy?")}
        assert {api, web, ci} <= everything
        by_path = md.search("how do we deploy?", paths=["services/api/main.py"])
        assert [h.memory.id for h in by_path] == [api]
        by_tag = md.search("how do we deploy?", tags=["web", "ci"])
        assert {h.memory.id for h in by_tag} == {web, ci}
        md.archive(web)
        assert web not in {h.memory.id for h in md.search("how do we deploy?")}
        archived = md.search("how do we deploy?", include_archived=True)
        assert web in {h.memory.id for h in archived}
