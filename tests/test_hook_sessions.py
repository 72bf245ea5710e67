"""What hooks of one session claim in the index: the recall daemon selects and the hook
claims only what it injects; session-start context counts as surfaced. Real subprocesses,
a real daemon on a real socket, real SQLite files."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hook_support import hooks_log, running_daemon, surfaced, wait_until
from memdir import Memdir
from memdir.agents.daemon import ask, socket_path

DEPLOY = "CI/CD considerations: pipelines run on self-hosted runners"
PROMPT = "what is our deployment process?"  # words miss DEPLOY; the daemon's meaning finds it


def _hook(home: Path, repo: Path, event: str, payload: dict[str, object],
          **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memdir", "hook", event],
                          input=json.dumps(payload), capture_output=True, text=True, cwd=repo,
                          timeout=60, env={**os.environ, "MEMDIR_HOME": str(home),
                                           "MEMDIR_DAEMON": "0", **env})





@pytest.fixture
def daemon(home: Path, repo: Path) -> Iterator[subprocess.Popen[bytes]]:
    pytest.importorskip("onnxruntime", reason="the warm daemon needs the embed extra")
    with Memdir(home=home, project=repo) as md:
        md.store(DEPLOY, type="decision")
        md.store("The chocolate cake recipe uses dark cocoa", type="fact")
        for i in range(8):
            md.store(f"Cache rule {i}: the cache layer invalidates on write {i}", type="fact")
    with running_daemon(home) as proc:
        yield proc


def test_a_slow_daemon_claims_nothing_the_hook_did_not_deliver(
        home: Path, repo: Path, daemon: subprocess.Popen[bytes]) -> None:
    payload = {"session_id": "slow-1", "cwd": str(repo), "prompt": PROMPT}
    # Keep the daemon busy: it serves one request at a time and waits up to 5 s for each of
    # these connections' line, so the hook's request waits behind them, past its 0.5 s.
    busy = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    try:
        for conn in busy:
            conn.connect(str(socket_path(home)))
        time.sleep(0.3)  # accepted: the daemon now reads from the first one
        first = _hook(home, repo, "prompt", payload)
    finally:
        for conn in busy:
            conn.close()
    assert first.returncode == 0 and first.stderr == ""
    assert DEPLOY not in first.stdout  # the hook recalled by words: they miss it
    # The daemon now serves the request the hook gave up on, then this ping.
    assert ask(home, {"op": "ping"}, timeout=30) is not None
    assert surfaced(home, "slow-1") == set()  # nothing claimed that nobody delivered
    # Its meaning needs the model and the memories' vectors, which the daemon loads and fills
    # in the background; a busy machine can also make it miss 0.5 s again: no harm then.
    shown: list[str] = []

    def delivered() -> bool:
        shown.append(_hook(home, repo, "prompt", payload).stdout)
        return DEPLOY in shown[-1]

    assert wait_until(delivered, 60), hooks_log(home)  # the warm daemon's pick, delivered now
    assert sum(DEPLOY in text for text in shown) == 1
    assert _hook(home, repo, "prompt", payload).stdout.count(DEPLOY) == 0  # once a session


def test_hooks_asking_the_daemon_at_once_never_deliver_a_memory_twice(
        home: Path, repo: Path, daemon: subprocess.Popen[bytes]) -> None:
    payload = {"session_id": "race-1", "cwd": str(repo),
               "prompt": "how does the cache layer invalidate on write?"}
    with ThreadPoolExecutor(4) as pool:
        outputs = [r.stdout for r in pool.map(
            lambda _: _hook(home, repo, "prompt", payload), range(4))]
    delivered = [f"Cache rule {i}:" for i in range(8) for out in outputs
                 if f"Cache rule {i}:" in out]
    assert len(delivered) == len(set(delivered)) == 8  # each once, by one hook or another
    assert len(surfaced(home, "race-1")) == 8


def test_memories_of_the_session_start_context_are_not_recalled_again(
        home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("Never force-push to the main branch", type="policy")
    base = {"cwd": str(repo), "transcript_path": ""}
    start = _hook(home, repo, "session-start", {**base, "session_id": "s1",
                                                "source": "startup"})
    assert "Never force-push" in start.stdout
    prompt = {**base, "prompt": "may I force-push to the main branch?"}
    assert _hook(home, repo, "prompt", {**prompt, "session_id": "s1"}).stdout == ""
    # A session that did not get the context gets the memory from recall.
    assert "Never force-push" in _hook(home, repo, "prompt",
                                       {**prompt, "session_id": "s2"}).stdout
    # Without a session id there is nothing to mark; the context is shown all the same.
    assert "Never force-push" in _hook(home, repo, "session-start", base).stdout


def test_a_memory_cut_short_in_the_context_is_still_recalled_in_full(
        home: Path, repo: Path) -> None:
    body = "Release train runbook: " + " ".join(f"step{i} checks the canary" for i in range(90))
    with Memdir(home=home, project=repo) as md:
        md.store(body, type="policy")
    base = {"cwd": str(repo), "transcript_path": "", "session_id": "s1"}
    start = _hook(home, repo, "session-start", base)
    assert "Release train runbook" in start.stdout and body not in start.stdout
    recalled = _hook(home, repo, "prompt", {**base, "prompt": "the release train runbook"})
    assert body in recalled.stdout
