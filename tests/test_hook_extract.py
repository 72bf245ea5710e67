"""Stop and PreCompact hooks on one transcript at once: each message is extracted by one
of them only (the extraction cursor is claimed under the index's write lock). Real hook
subprocesses, a real SQLite index locked by another process."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from hook_support import hooks_log, write_transcript
from memdir import Memdir


def test_concurrent_stop_and_pre_compact_hooks_extract_a_transcript_once(
        home: Path, repo: Path, tmp_path: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("The staging cluster is in eu-west-1", type="fact")  # an index to lock
    path = write_transcript(tmp_path / "t.jsonl", "ext-1",
                            ("user", "I prefer pnpm over npm for this repo."),
                            ("assistant", "Noted, pnpm it is."))
    payload = {"session_id": "ext-1", "cwd": str(repo), "transcript_path": str(path),
               "stop_hook_active": False}
    # Another process holds the write lock while the hooks start: without the cursor
    # claimed under that lock, each would read the same cursor and extract the same message.
    stdin = tmp_path / "payload.json"
    stdin.write_text(json.dumps(payload))
    holder = sqlite3.connect(home / "index.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        procs = []
        for event in ("stop", "pre-compact", "stop", "pre-compact"):
            with stdin.open() as fh:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "memdir", "hook", event], stdin=fh,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=repo, text=True,
                    env={**os.environ, "MEMDIR_HOME": str(home)}))
        time.sleep(4)  # every hook has started and waits for the lock
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out == "" and err == ""
    with Memdir(home=home, project=repo) as md:
        found = [m for m in md.list() if "pnpm" in m.body]
    assert len(found) == 1, hooks_log(home)
    assert found[0].reinforced == 0, hooks_log(home)  # stored once, never reinforced by a twin
    assert "1 stored" in hooks_log(home)
