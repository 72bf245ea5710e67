"""`memdir hook <event>` as Claude Code runs it: one subprocess per event, the documented
JSON on stdin; stdout, exit code and the files written are asserted. Hooks never fail."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hook_support import hooks_log, write_transcript
from memdir import Memdir

Hook = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def hook(home: Path, repo: Path) -> Hook:
    def run(event: str, payload: object | str, *args: str,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        stdin = payload if isinstance(payload, str) else json.dumps(payload)
        return subprocess.run(
            [sys.executable, "-m", "memdir", "hook", event, *args], input=stdin, cwd=repo,
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "MEMDIR_HOME": str(home), **(env or {})})
    return run


def _base(repo: Path, session: str = "sess-1", **extra: object) -> dict[str, object]:
    return {"session_id": session, "cwd": str(repo), "transcript_path": "", **extra}





def test_session_start_prints_the_context(hook: Hook, home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("Never force-push to main", type="policy")
    result = hook("session-start", {**_base(repo), "hook_event_name": "SessionStart",
                                    "source": "startup"})
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith('<memory-context source="memdir">')
    assert "Never force-push to main" in result.stdout
    as_json = hook("session-start", {**_base(repo), "source": "compact"}, "--format", "json")
    data = json.loads(as_json.stdout)
    context = data["hookSpecificOutput"]["additionalContext"]
    assert data["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "Never force-push to main" in context and len(context) <= 10_000


def test_session_start_onboards_a_new_user(hook: Hook, repo: Path) -> None:
    result = hook("session-start", {**_base(repo), "source": "startup"})
    assert result.returncode == 0 and "First session" in result.stdout


def test_session_start_output_is_capped(hook: Hook, home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store_many([{"content": f"Policy {n}: " + "keep it short " * 30, "type": "policy"}
                       for n in range(60)])
    result = hook("session-start", _base(repo))
    assert result.returncode == 0 and 0 < len(result.stdout) <= 10_001


def test_prompt_recalls_once_per_session(hook: Hook, home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("The billing service retries webhooks three times", type="fact")
    payload = {**_base(repo), "hook_event_name": "UserPromptSubmit",
               "prompt": "why do billing webhooks retry?"}
    first = hook("prompt", payload)
    assert first.returncode == 0 and "retries webhooks three times" in first.stdout
    assert first.stdout.startswith("<system-reminder>")
    again = hook("prompt", payload)
    assert again.returncode == 0 and again.stdout == ""
    other = hook("prompt", {**payload, "session_id": "sess-2"}, "--format", "json")
    assert "retries webhooks" in json.loads(other.stdout)["hookSpecificOutput"][
        "additionalContext"]


def test_stop_extracts_from_the_transcript(hook: Hook, home: Path, repo: Path,
                                          tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "s.jsonl", "sess-1",
                       ("user", "I prefer pnpm over npm for this repo."),
                       ("assistant", "Noted, I will use pnpm."))
    result = hook("stop", {**_base(repo), "transcript_path": str(path),
                           "stop_hook_active": False})
    assert result.returncode == 0 and result.stdout == ""
    with Memdir(home=home, project=repo) as md:
        assert [m.type for m in md.list()] == ["preference"]
    other = write_transcript(tmp_path / "t.jsonl", "sess-2",
                        ("user", "I prefer tabs over spaces in Makefiles."), ("assistant", "OK"))
    active = hook("stop", {**_base(repo, "sess-2"), "transcript_path": str(other),
                           "stop_hook_active": True})
    assert active.returncode == 0
    with Memdir(home=home, project=repo) as md:
        assert len(md.list()) == 1  # a stop hook already running: nothing extracted


def test_session_end_returns_at_once_and_indexes_in_the_background(
        hook: Hook, home: Path, repo: Path, tmp_path: Path) -> None:
    path = write_transcript(tmp_path / "end.jsonl", "sess-9",
                       ("user", "The quokka service pages on-call at night."),
                       ("assistant", "I will remember that."))
    started = time.monotonic()
    result = hook("session-end", {**_base(repo, "sess-9"), "transcript_path": str(path),
                                  "reason": "exit"})
    assert result.returncode == 0 and result.stdout == ""
    assert time.monotonic() - started < 5  # the work itself happens in another process
    deadline = time.monotonic() + 30
    hits: list[object] = []
    while time.monotonic() < deadline and not hits:
        time.sleep(0.2)
        with Memdir(home=home, project=repo) as md:
            hits = list(md.search("quokka", sources=("sessions",)))
    assert hits, hooks_log(home)


@pytest.mark.parametrize("event", ["session-start", "prompt", "stop", "pre-compact",
                                   "session-end"])
def test_garbage_never_breaks_the_agent(hook: Hook, home: Path, event: str) -> None:
    for stdin in ["not json at all", "[1, 2]", '{"truncated": ']:
        result = hook(event, stdin)
        assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    assert "JSONDecodeError" in hooks_log(home) or "not a JSON object" in hooks_log(home)
    for stdin in ["", '{"transcript_path": 5, "prompt": [], "cwd": 7}']:  # odd but JSON
        result = hook(event, stdin)
        assert result.returncode == 0 and result.stderr == ""


def test_a_missing_transcript_is_logged(hook: Hook, home: Path, repo: Path) -> None:
    result = hook("stop", {**_base(repo), "transcript_path": str(repo / "nope.jsonl")})
    assert result.returncode == 0 and result.stdout == ""
    assert "no transcript at" in hooks_log(home)


def test_a_read_only_home_exits_0(hook: Hook, home: Path, repo: Path) -> None:
    if os.geteuid() == 0:
        # root ignores file modes: make the home unusable another way (a file in its place)
        home.parent.mkdir(parents=True, exist_ok=True)
        home.write_text("not a directory")
    else:
        home.mkdir(parents=True, exist_ok=True)
        home.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        for event in ("session-start", "prompt", "stop"):
            result = hook(event, {**_base(repo), "prompt": "two words"})
            assert result.returncode == 0 and result.stdout == "" and result.stderr == ""
    finally:
        if home.is_dir():
            home.chmod(stat.S_IRWXU)


def test_unknown_events_and_arguments_exit_0(hook: Hook, home: Path) -> None:
    result = hook("no-such-event", "{}", "--bogus", "--format")
    assert result.returncode == 0 and result.stdout == ""
    assert "unknown hook event" in hooks_log(home)


def test_disabled_hooks_do_nothing(hook: Hook, home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("Never force-push to main", type="policy")
    off = hook("session-start", _base(repo), env={"MEMDIR_DISABLE": "1"})
    assert off.returncode == 0 and off.stdout == ""
    (home / "config.toml").write_text("[hooks]\nenabled = false\n")
    assert hook("session-start", _base(repo)).stdout == ""
    (home / "config.toml").write_text("[hooks]\nenabled = true\n")
    assert "force-push" in hook("session-start", _base(repo)).stdout


@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_hooks_import_no_heavy_library(home: Path, repo: Path, event: str) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("Deploys go through the staging cluster first", type="procedure")
    payload = json.dumps({"cwd": str(repo), "session_id": "s1",
                          "prompt": "how do deploys reach production?"})
    code = (f"import sys, io; sys.stdin = io.StringIO({payload!r}); "
            f"from memdir.cli.main import main; main(['hook', {event!r}]); "
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True,
                         text=True, check=True,
                         env={**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_DAEMON": "0"})
    assert "staging cluster" in out.stdout  # the hook did its work
    loaded = set(out.stderr.split())
    heavy = {"mcp", "fastapi", "starlette", "uvicorn", "httpx", "numpy", "onnxruntime",
             "tokenizers", "psycopg", "pydantic", "urllib3", "requests"}
    assert not loaded & heavy, loaded & heavy
    # Nor the standard library's slow starters, unless a hook needs them (a daemon to ask or
    # start, a failure to log): each costs milliseconds of every agent prompt.
    slow = {"subprocess", "socket", "hashlib", "tempfile", "logging", "traceback", "shutil",
            "tomllib", "threading"}
    assert not loaded & slow, loaded & slow


@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_a_locked_index_holds_a_hook_no_longer_than_its_limit(
        hook: Hook, home: Path, repo: Path, event: str) -> None:
    # Another process holds the write lock. SQLite's busy wait (up to 30 s) cannot be cut
    # short by the hook's alarm, so the hook caps it at its own limit.
    from memdir.agents.hooks import LIMITS

    with Memdir(home=home, project=repo) as md:
        memory = md.store("The billing service retries webhooks three times", type="fact")
    assert memory.path is not None
    memory.path.write_text(memory.path.read_text().replace("three", "five"))  # to reconcile
    holder = sqlite3.connect(home / "index.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        payload = {**_base(repo), "prompt": "why do billing webhooks retry?"}
        started = time.monotonic()
        result = hook(event, payload)
        took = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.returncode == 0 and result.stderr == ""
    assert took < LIMITS[event] + 3, took  # interpreter start-up and imports on top
    assert "locked" in hooks_log(home) or "gave up" in hooks_log(home)


def test_the_daemon_answers_for_the_hooks_own_project(
        home: Path, repo: Path, tmp_path: Path) -> None:
    # The daemon runs in whichever project started it: for an event without a usable cwd it
    # must use the directory the hook itself runs in (sent with the request), absolute.
    from memdir import Memdir
    from memdir.agents.daemon_hooks import answer, parse_head

    opened: list[str] = []

    def store(project: str) -> Memdir:
        opened.append(project)
        return Memdir(home=home, project=project)

    cwds: list[str | None] = [None, "", "relative/dir", str(tmp_path / "missing"), str(repo)]
    for n, cwd in enumerate(cwds):
        payload = {"session_id": f"s{n}", "prompt": "why do billing webhooks retry?",
                   **({} if cwd is None else {"cwd": cwd})}
        head = (f"HOOK prompt text 1e12 {str(home).encode().hex()} "
                f"{str(repo).encode().hex()} 0").encode()
        request = parse_head(head)
        assert request is not None
        reply = answer(request, json.dumps(payload).encode(), home, store, lambda h: h == str(home))
        assert reply.startswith(b"OK ")
    assert opened == [os.path.abspath(repo)] * len(cwds)
    other = parse_head(f"HOOK prompt text 1e12 {b'/elsewhere'.hex()} {b'/'.hex()} 0".encode())
    assert other is not None  # a daemon never answers for another home
    assert answer(other, b"{}", home, store, lambda h: h == str(home)) == b"NO another home\n"


def test_warnings_go_to_the_hook_log_not_to_the_agent(hook: Hook, home: Path,
                                                      repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("Deploys go out on Tuesdays", type="project", relevance="critical")
        md.search("tuesdays")  # reconciled: the hook below only reads, then counts usage
    holder = sqlite3.connect(home / "index.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the usage counters cannot be written
    try:
        result = hook("session-start", _base(repo))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.returncode == 0 and "Tuesdays" in result.stdout
    assert result.stderr == ""
    assert "usage counters not updated" in hooks_log(home)


@pytest.mark.parametrize("before", [["--home", "{home}"], ["--home={home}", "--json"],
                                    ["--json", "--project", "{repo}", "--home", "{home}"]])
def test_options_before_hook_still_take_the_hook_path(home: Path, repo: Path,
                                                     before: list[str]) -> None:
    # `memdir --home DIR hook EVENT`: the options come before `hook`, and the hook must
    # still never fail (no argparse) and use that home, not $MEMDIR_HOME.
    with Memdir(home=home, project=repo) as md:
        md.store("Never force-push to the main branch", type="policy")
    words = [w.format(home=home, repo=repo) for w in before]
    env = {**os.environ, "MEMDIR_HOME": str(repo.parent / "elsewhere")}

    def run(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memdir", *words, "hook", *args],
                              input=stdin, cwd=repo, capture_output=True, text=True,
                              env=env, timeout=60)

    result = run("session-start", "--format", "json", stdin=json.dumps(_base(repo)))
    assert result.returncode == 0 and result.stderr == ""
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Never force-push" in context
    for args in (("no-such-event",), ("prompt", "--bogus")):
        odd = run(*args, stdin="not json")
        assert odd.returncode == 0 and odd.stdout == "" and odd.stderr == ""
    assert "unknown hook event" in hooks_log(home) and "JSONDecodeError" in hooks_log(home)
    assert not (repo.parent / "elsewhere").exists()
