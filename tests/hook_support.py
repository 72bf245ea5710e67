"""Helpers the hook tests share: the hooks' log, a transcript as Claude Code writes it, and
waiting for something a background process does."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def hooks_log(home: Path) -> str:
    """What the hooks of ``home`` logged so far ('' before the first line)."""
    log = home / "logs" / "hooks.log"
    return log.read_text() if log.exists() else ""


def write_transcript(path: Path, session: str, *lines: tuple[str, str]) -> Path:
    """A Claude Code transcript (JSON Lines) of ``(role, text)`` turns at ``path``."""
    rows = []
    for n, (role, text) in enumerate(lines):
        rows.append(json.dumps({
            "type": role, "uuid": f"u{n}", "sessionId": session, "cwd": str(path.parent),
            "timestamp": f"2026-11-20T09:00:{n:02d}Z", "isSidechain": False,
            "message": {"role": role, "content": text}}))
    path.write_text("\n".join(rows) + "\n")
    return path


def wait_until(predicate: object, seconds: float) -> bool:
    """Whether ``predicate()`` became true within ``seconds`` (checked every 0.1 s)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return True
        time.sleep(0.1)
    return False


def run_memdir(args: list[str], home: Path, repo: Path, stdin: str = "") -> str:
    """stdout of a real `memdir` process in ``repo`` with the test's home; it must exit 0."""
    result = subprocess.run([sys.executable, "-m", "memdir", *args], input=stdin, cwd=repo,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "MEMDIR_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    return result.stdout


@contextlib.contextmanager
def running_daemon(home: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``memdir daemon`` for ``home``, up (it answers a ping) for the block, then
    stopped."""
    from memdir.agents.daemon import ask

    proc = subprocess.Popen([sys.executable, "-m", "memdir", "daemon", "--idle", "120"],
                            env={**os.environ, "MEMDIR_HOME": str(home)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: ask(home, {"op": "ping"}) is not None, 60), "no daemon"
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


def surfaced(home: Path, session: str) -> set[str]:
    """The ids the index counts as surfaced (claimed) for ``session``."""
    conn = sqlite3.connect(home / "index.sqlite")
    try:
        return {r[0] for r in conn.execute(
            "SELECT id FROM recall_surfaced WHERE session_id = ?", (session,))}
    finally:
        conn.close()
