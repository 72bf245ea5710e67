"""``transcript_path`` is hostile: hooks read only Claude Code / Codex session files, never
follow a link or wait on a pipe, and read from the session's offset in bounded memory.
Real hook subprocesses, real files (a fake /etc/shadow, FIFOs, symlinks, large JSONL)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hook_support import hooks_log, wait_until, write_transcript
from memdir import Memdir
from memdir.capture.transcript_file import MAX_LINE, open_transcript, read_window

SHADOW = ("root:$6$Zq3x9v1c$VerySecretHashOfRootPasswordAbCdEfGh0123456789:19700:0:99999:7:::\n"
          "daemon:*:19700:0:99999:7:::\n"
          "alice:$6$aB1cD2eF$AliceHashAliceHashAliceHash0123456789abcdef:19701:0:99999:7:::\n")
PREFERENCE = "I prefer pnpm over npm for this repo."
CONSTRAINT = "We must never push directly to main."


def _hook(home: Path, repo: Path, event: str, payload: dict[str, object],
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memdir", "hook", event],
                          input=json.dumps(payload), capture_output=True, text=True, cwd=repo,
                          timeout=timeout, env={**os.environ, "MEMDIR_HOME": str(home),
                                                "MEMDIR_DAEMON": "0"})


def _payload(repo: Path, path: Path | str, session: str = "hostile-1") -> dict[str, object]:
    return {"session_id": session, "cwd": str(repo), "transcript_path": str(path),
            "stop_hook_active": False}


def _chunks(home: Path) -> list[str]:
    conn = sqlite3.connect(home / "index.sqlite")
    try:
        return [r[0] for r in conn.execute("SELECT text FROM session_chunks")]
    finally:
        conn.close()


def _bodies(home: Path, repo: Path) -> list[str]:
    with Memdir(home=home, project=repo) as md:
        return [m.body for m in md.list()]


# --- a file that is not a transcript -----------------------------------------------------------

def test_session_end_does_not_index_a_shadow_file(home: Path, repo: Path,
                                                   tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.write_text(SHADOW)
    result = _hook(home, repo, "session-end", _payload(repo, shadow))
    assert result.returncode == 0 and result.stdout == ""
    # The detached child logs what it did (old code: "indexed 1 chunks").
    assert wait_until(lambda: "session-end:" in hooks_log(home), 30), hooks_log(home)
    assert "not a Claude Code or Codex transcript" in hooks_log(home)
    assert "Traceback" not in hooks_log(home)  # refused input, said in one line with a hint
    assert not (home / "index.sqlite").exists() or _chunks(home) == []
    found = subprocess.run([sys.executable, "-m", "memdir", "--json", "search", "root",
                            "--sessions"], capture_output=True, text=True, cwd=repo,
                           timeout=60, env={**os.environ, "MEMDIR_HOME": str(home)})
    assert found.returncode == 0, found.stderr
    assert "VerySecretHash" not in found.stdout and "alice" not in found.stdout
    assert json.loads(found.stdout) == []


def test_stop_refuses_plain_text_the_cli_reads_only_when_asked(
        home: Path, repo: Path, tmp_path: Path) -> None:
    chat = tmp_path / "chat.txt"
    chat.write_text(f"User: {PREFERENCE}\nAssistant: Noted.\n")
    assert _hook(home, repo, "stop", _payload(repo, chat)).returncode == 0
    assert "not a Claude Code or Codex transcript" in hooks_log(home)
    assert _bodies(home, repo) == []

    env = {**os.environ, "MEMDIR_HOME": str(home)}
    refused = subprocess.run([sys.executable, "-m", "memdir", "extract", "--transcript",
                              str(chat)], capture_output=True, text=True, cwd=repo, env=env,
                             timeout=60)
    assert refused.returncode != 0 and "--format text" in refused.stderr
    assert _bodies(home, repo) == []
    shadow = tmp_path / "shadow"
    shadow.write_text(SHADOW)
    indexed = subprocess.run([sys.executable, "-m", "memdir", "index-session", str(shadow),
                              "--session", "s1"], capture_output=True, text=True, cwd=repo,
                             env=env, timeout=60)
    assert indexed.returncode != 0 and "--format text" in indexed.stderr
    assert _chunks(home) == []
    asked = subprocess.run([sys.executable, "-m", "memdir", "extract", "--transcript",
                            str(chat), "--format", "text", "--no-llm"], capture_output=True,
                           text=True, cwd=repo, env=env, timeout=60)
    assert asked.returncode == 0, asked.stderr
    assert any("pnpm" in body for body in _bodies(home, repo))


# --- paths that are not files ------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "said"), [
    ("directory", "is a directory"), ("fifo", "is a pipe"), ("device", "is a device"),
    ("symlink", "is a symlink"), ("symlink-to-fifo", "is a symlink")])
@pytest.mark.parametrize("event", ["stop", "session-end"])
def test_hostile_paths_are_refused_without_waiting(home: Path, repo: Path, tmp_path: Path,
                                                   kind: str, said: str, event: str) -> None:
    real = write_transcript(tmp_path / "real.jsonl", "hostile-1", ("user", PREFERENCE),
                            ("assistant", "Noted."))
    path = tmp_path / "given"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # nobody ever writes: a reader that opens it blocking waits forever
    elif kind == "device":
        path = Path("/dev/zero")  # endless: a whole-file read never ends
    elif kind == "symlink":
        path.symlink_to(real)
    else:
        os.mkfifo(tmp_path / "pipe")
        path.symlink_to(tmp_path / "pipe")
    result = _hook(home, repo, event, _payload(repo, path), timeout=30)
    assert result.returncode == 0 and result.stdout == ""
    assert wait_until(lambda: said in hooks_log(home), 30), hooks_log(home)
    assert _bodies(home, repo) == []  # the symlink's target, a real transcript, is not read


# --- reading from the cursor, bounded ----------------------------------------------------------

def test_stop_reads_on_from_the_offset_not_the_start(home: Path, repo: Path,
                                                     tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", "cur-1", ("user", PREFERENCE),
                            ("assistant", "Noted, pnpm it is."))
    assert _hook(home, repo, "stop", _payload(repo, path, "cur-1")).returncode == 0
    assert any("pnpm" in body for body in _bodies(home, repo)), hooks_log(home)
    # Bytes before the offset become garbage (same length): a reader that starts again
    # from the top numbers the new message as one already extracted and drops it.
    data = path.read_bytes()
    first_end = data.index(b"\n")
    garbage = b"\x00\xff" * (first_end // 2) + b"\x00" * (first_end % 2)
    appended = json.dumps({"type": "user", "uuid": "u9", "sessionId": "cur-1", "cwd": "/x",
                           "timestamp": "2026-11-20T09:01:00Z",
                           "message": {"role": "user", "content": CONSTRAINT}})
    path.write_bytes(garbage + data[first_end:] + appended.encode() + b"\n")
    assert _hook(home, repo, "stop", _payload(repo, path, "cur-1")).returncode == 0
    bodies = _bodies(home, repo)
    assert any("push directly to main" in body for body in bodies), hooks_log(home)
    assert "1 stored" in hooks_log(home).splitlines()[-1]


def _big_transcript(path: Path, session: str, megabytes: int) -> None:
    """A Claude Code file: a preference at the very start, then long tool output, then a
    constraint in the last turn."""
    def line(n: int, role: str, content: object) -> str:
        return json.dumps({"type": role, "uuid": f"u{n}", "sessionId": session, "cwd": "/x",
                           "timestamp": "2026-11-20T09:00:00Z",
                           "message": {"role": role, "content": content}}) + "\n"

    output = "tests/test_payments.py::case PASSED " * 200
    block = "".join(line(n, "user", [{"type": "tool_result", "tool_use_id": f"t{n}",
                                      "content": output}]) for n in range(100))
    with path.open("w") as fh:
        fh.write(line(0, "user", PREFERENCE))
        written = 0
        while written < megabytes << 20:
            fh.write(block)
            written += len(block)
        fh.write(line(10**6, "user", CONSTRAINT))


def test_stop_on_a_large_transcript_reads_the_end_in_bounded_memory(
        home: Path, repo: Path, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    _big_transcript(path, "big-1", 60)
    size = path.stat().st_size
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(_payload(repo, path, "big-1")))
    # Peak resident memory of the hook process, measured by a parent that runs only it.
    measure = ("import resource, subprocess, sys\n"
               "with open(sys.argv[1]) as fh:\n"
               "    subprocess.run([sys.executable, '-m', 'memdir', 'hook', 'stop'], stdin=fh,"
               " check=True)\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", measure, str(payload)], capture_output=True,
                         text=True, cwd=repo, timeout=120,
                         env={**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_DAEMON": "0"})
    assert out.returncode == 0, out.stderr
    peak = int(out.stdout.split()[-1]) * 1024
    assert peak < size * 0.75, (peak, size)  # reading it whole holds it twice (bytes + text)
    bodies = _bodies(home, repo)
    assert any("push directly to main" in body for body in bodies), hooks_log(home)
    assert not any("pnpm" in body for body in bodies)  # past the budget: left unread, said so
    assert "left unread" in hooks_log(home)


def test_a_window_past_the_budget_is_numbered_after_the_cursor(home: Path, repo: Path,
                                                               tmp_path: Path) -> None:
    # The whole file extracted by the CLI: the cursor is at the last message's position,
    # the offset still at 0 (the CLI keeps none).
    path = tmp_path / "big.jsonl"
    _big_transcript(path, "num-1", 12)
    env = {**os.environ, "MEMDIR_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "memdir", "extract", "--transcript", str(path),
                           "--session", "num-1", "--no-llm"], capture_output=True, text=True,
                          cwd=repo, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "user", "sessionId": "num-1", "message": {
            "role": "user", "content": "Always use UTC in log timestamps."}}) + "\n")
    # The hook reads only the last 8 MB: numbered from 0, its messages would all fall at or
    # before the cursor and be dropped as extracted already.
    assert _hook(home, repo, "stop", _payload(repo, path, "num-1")).returncode == 0
    assert any("UTC in log timestamps" in body for body in _bodies(home, repo)), \
        hooks_log(home)


def test_session_end_indexes_the_end_of_a_large_transcript(home: Path, repo: Path,
                                                           tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    _big_transcript(path, "big-2", 24)
    assert _hook(home, repo, "session-end", _payload(repo, path, "big-2")).returncode == 0
    assert wait_until(lambda: "session-end: indexed" in hooks_log(home), 60), hooks_log(home)
    chunks = " ".join(_chunks(home))
    assert "push directly to main" in chunks
    assert "pnpm" not in chunks  # the index covers the last 16 MB


# --- the reader itself -------------------------------------------------------------------------

def test_an_over_long_line_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", "long-1", ("user", PREFERENCE))
    huge = json.dumps({"type": "user", "sessionId": "long-1",
                       "message": {"role": "user", "content": "x" * (MAX_LINE + 10)}})
    with path.open("a") as fh:
        fh.write(huge + "\n")
        fh.write(json.dumps({"type": "user", "sessionId": "long-1",
                             "message": {"role": "user", "content": CONSTRAINT}}) + "\n")
    with open_transcript(path) as fh:
        window = read_window(fh, budget=1 << 30)
    assert [m.text for m in window.transcript.messages] == [PREFERENCE, CONSTRAINT]
    assert window.long_lines == 1 and window.transcript.skipped == 1
    assert window.end == path.stat().st_size and window.complete


def test_a_read_past_its_deadline_stops_and_says_so(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", "late-1", ("user", PREFERENCE),
                            ("assistant", "Noted."))
    with open_transcript(path) as fh:
        window = read_window(fh, budget=1 << 30, deadline=time.monotonic() - 1)
    assert window.transcript.messages == () and window.end == 0 and not window.complete


def test_the_line_being_written_is_left_for_the_next_read(tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "t.jsonl", "part-1", ("user", PREFERENCE))
    whole = path.stat().st_size
    with path.open("a") as fh:
        fh.write('{"type": "user", "message": {"role": "user", "content": "We mu')
    with open_transcript(path) as fh:
        window = read_window(fh, budget=1 << 30)
        assert window.end == whole and window.transcript.skipped == 0
        again = read_window(fh, start=window.end, first_index=1, budget=1 << 30)
    assert again.transcript.messages == () and again.end == whole
