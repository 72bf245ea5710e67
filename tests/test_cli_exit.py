"""How the `memdir` command ends (memdir.cli.main.run): its exit code, every byte of its output
flushed, atexit handlers run, and a thread still running waited for, although it skips
Python's teardown with os._exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import CLI
from memdir import Memdir


def _python(code: str, repo: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=repo, timeout=60,
                          capture_output=True, text=True,
                          env={**os.environ, "MEMDIR_HOME": str(home)})


def test_output_larger_than_a_pipe_arrives_whole(md: Memdir, cli: CLI) -> None:
    # Far more than a pipe's 64 KiB buffer, through the command and its quick exit.
    md.store_many([{"content": f"memory number {n} " + "padding words " * 30, "type": "fact"}
                   for n in range(300)])
    done = cli("list", "--json", "--limit", "1000")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert len(done.stdout) > 100_000 and len(listed) == 300
    assert {m["content"].split(" padding")[0] for m in listed} == {
        f"memory number {n}" for n in range(300)}


def test_exit_codes_survive_the_quick_exit(cli: CLI) -> None:
    missing = cli("get", "no-such-memory")
    assert missing.returncode == 3
    assert "error: no memory with id or file 'no-such-memory'" in missing.stderr
    assert "hint:" in missing.stderr
    assert cli("--version").returncode == 0


def test_a_closed_pipe_is_not_an_error(md: Memdir, repo: Path, home: Path) -> None:
    md.store_many([{"content": f"line {n} of a long listing", "type": "fact"}
                   for n in range(400)])
    shell = subprocess.run(
        f"{sys.executable} -m memdir list | head -n 1; echo \"status=${{PIPESTATUS[0]}}\"",
        shell=True, executable="/bin/bash", cwd=repo, capture_output=True, text=True,
        timeout=60, env={**os.environ, "MEMDIR_HOME": str(home)})
    assert shell.stdout.splitlines()[-1] == "status=0"
    assert "Traceback" not in shell.stderr and "Exception ignored" not in shell.stderr


def test_atexit_handlers_run_and_their_output_is_flushed(repo: Path, home: Path) -> None:
    done = _python("""
        import atexit, sys
        atexit.register(lambda: print("handler ran", flush=False))
        sys.argv = ["memdir", "stats", "--json"]
        from memdir.cli.main import run
        run()
        """, repo, home)
    assert done.returncode == 0, done.stderr
    stats, last = done.stdout.rsplit("\n", 2)[0], done.stdout.splitlines()[-1]
    assert last == "handler ran"
    assert isinstance(json.loads(stats), dict)


def test_a_running_thread_is_waited_for(repo: Path, home: Path) -> None:
    done = _python("""
        import sys, threading, time
        def later():
            time.sleep(0.5)
            print("thread finished")
        threading.Thread(target=later).start()
        sys.argv = ["memdir", "--version"]
        from memdir.cli.main import run
        run()
        """, repo, home)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "thread finished"
