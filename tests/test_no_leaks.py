"""No memdir process outlives its use: after many agent sessions in a row and at once (the
hooks start the warm daemon, session end detaches a background process), one daemon at most
serves the home, it exits by itself once idle, and nothing else is left running. Processes
are counted in /proc by the home they name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memdir import Memdir
from memdir.retrieval.embed import available

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(),
                                reason="counts processes through /proc (Linux)")


def _memdir_processes(home: Path) -> list[str]:
    """The command lines of running processes that are memdir's for ``home``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and "memdir" in line and (str(home) in line or _env_home(entry, home)):
            found.append(line.strip())
    return found


def _env_home(entry: Path, home: Path) -> bool:
    try:
        return f"MEMDIR_HOME={home}\0".encode() in (entry / "environ").read_bytes()
    except OSError:
        return False


def _hook(event: str, payload: dict[str, object], env: dict[str, str], repo: Path) -> None:
    subprocess.run([sys.executable, "-m", "memdir", "hook", event],
                   input=json.dumps(payload), text=True, capture_output=True, cwd=repo,
                   env=env, timeout=60, check=True)


def _session(n: int, env: dict[str, str], repo: Path, transcript: Path) -> None:
    sid = f"session-{n}"
    base = {"session_id": sid, "cwd": str(repo), "transcript_path": str(transcript)}
    _hook("session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"},
          env, repo)
    _hook("prompt", {**base, "hook_event_name": "UserPromptSubmit",
                     "prompt": "which package manager do we use?"}, env, repo)
    _hook("stop", {**base, "hook_event_name": "Stop", "stop_hook_active": False}, env, repo)
    _hook("session-end", {**base, "hook_event_name": "SessionEnd", "reason": "exit"},
          env, repo)


@pytest.mark.skipif(not available(), reason="the warm daemon needs the embed extra")
def test_many_sessions_leave_no_process_behind(home: Path, repo: Path,
                                               tmp_path: Path) -> None:
    with Memdir(home, repo) as md:
        md.store("Use pnpm, never npm, in this repo", type="preference")
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {
        "role": "user", "content": "which package manager do we use?"}}) + "\n")
    env = {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_DAEMON": "1",
           "MEMDIR_DAEMON_IDLE": "4"}
    for n in range(6):  # in a row
        _session(n, env, repo, transcript)
    def daemons() -> list[str]:
        return [p for p in _memdir_processes(home) if " daemon " in f" {p} "]

    settle = time.monotonic() + 10  # a second one that lost the race to bind exits at once
    while len(daemons()) > 1 and time.monotonic() < settle:
        time.sleep(0.2)
    assert len(daemons()) == 1, daemons()  # the first prompt started it, the others use it
    with ThreadPoolExecutor(4) as pool:  # and at once
        list(pool.map(lambda n: _session(n, env, repo, transcript), range(6, 14)))
    settle = time.monotonic() + 10
    while len(daemons()) > 1 and time.monotonic() < settle:
        time.sleep(0.2)
    assert len(daemons()) <= 1, daemons()  # one per home, however many hooks started one
    deadline = time.monotonic() + 60
    while _memdir_processes(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _memdir_processes(home) == []  # the daemon exited idle; background work ended
