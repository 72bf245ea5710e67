"""Hooks answered by the warm daemon: the hook process imports nothing of memdir's core, the
daemon reconciles only when the memory directories changed (inotify), a hand edit between two
prompts shows in the next recall, and a late answer claims nothing. Real daemon processes,
real sockets, real files and SQLite."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hook_support import hooks_log, running_daemon, surfaced, wait_until
from memdir import Memdir
from memdir.agents.daemon import ask, socket_path
from memdir.core.dir_watch import DirWatch

LINUX = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_DAEMON": "0"}


def _hook(home: Path, repo: Path, event: str, payload: dict[str, object],
          *python_options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *python_options, "-m", "memdir", "hook", event],
                          input=json.dumps(payload), capture_output=True, text=True, cwd=repo,
                          timeout=60, env=_env(home))


@pytest.fixture
def daemon(home: Path, repo: Path) -> Iterator[subprocess.Popen[bytes]]:
    with Memdir(home=home, project=repo) as md:
        md.store("Billing webhooks retry five times with exponential backoff", type="fact")
        md.store("Never force-push to the main branch", type="policy")
    with running_daemon(home) as proc:
        yield proc


def test_the_daemon_answers_the_hook_and_the_hook_imports_nothing_heavy(
        home: Path, repo: Path, daemon: subprocess.Popen[bytes]) -> None:
    payload = {"session_id": "w1", "cwd": str(repo), "prompt": "why do billing webhooks retry?"}
    result = _hook(home, repo, "prompt", payload, "-X", "importtime")
    assert result.returncode == 0
    assert "Billing webhooks retry five times" in result.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "memdir.agents.hook_client" in imported  # it went the daemon's way ...
    for heavy in ("memdir.core.index", "memdir.memdir", "json", "typing", "sqlite3"):
        assert heavy not in imported, heavy  # ... and paid for nothing else
    assert surfaced(home, "w1")  # claimed for the session by the daemon that showed it
    again = _hook(home, repo, "prompt", payload)
    assert "Billing webhooks" not in again.stdout  # once a session
    start = _hook(home, repo, "session-start", {"session_id": "w2", "cwd": str(repo)},
                  "-X", "importtime")
    assert "Never force-push" in start.stdout and "memdir.memdir" not in start.stderr
    shown = _hook(home, repo, "session-start", {"session_id": "w3", "cwd": str(repo)})
    assert shown.stdout == start.stdout  # the same context for every session
    asked = _hook(home, repo, "prompt", {**payload, "session_id": "w2",
                                         "prompt": "may I force-push to main?"})
    assert "Never force-push" not in asked.stdout  # shown at session start already


def test_json_format_and_a_disabled_home_through_the_daemon(
        home: Path, repo: Path, daemon: subprocess.Popen[bytes]) -> None:
    payload = {"session_id": "j1", "cwd": str(repo), "prompt": "why do billing webhooks retry?"}
    result = subprocess.run([sys.executable, "-m", "memdir", "hook", "prompt", "--format",
                             "json"], input=json.dumps(payload), capture_output=True,
                            text=True, cwd=repo, timeout=60, env=_env(home))
    shown = json.loads(result.stdout)["hookSpecificOutput"]
    assert shown["hookEventName"] == "UserPromptSubmit"
    assert "Billing webhooks retry" in shown["additionalContext"]
    (home / "config.toml").write_text("[hooks]\nenabled = false\n")
    off = _hook(home, repo, "prompt", {**payload, "session_id": "j2"})
    assert off.returncode == 0 and off.stdout == ""


@LINUX
def test_a_hand_edit_between_two_prompts_is_in_the_next_recall(
        home: Path, repo: Path, daemon: subprocess.Popen[bytes]) -> None:
    with Memdir(home=home, project=repo) as md:
        folder = md.directory("project").path
        [memory] = [m for m in md.list() if "Billing" in m.body]
    ask_about = {"cwd": str(repo), "prompt": "what does the staging canary check?"}
    assert "canary" not in _hook(home, repo, "prompt", {**ask_about, "session_id": "e1"}).stdout
    # A new file written by hand (as an editor or `git pull` would) ...
    (folder / "fact_canary.md").write_text(
        "---\nname: Staging canary\ndescription: what the canary checks\ntype: fact\n---\n"
        "The staging canary checks the login flow and the checkout flow.\n", encoding="utf-8")
    found = _hook(home, repo, "prompt", {**ask_about, "session_id": "e2"})
    assert "checks the login flow" in found.stdout, hooks_log(home)
    # ... and an edit in place (same inode, as `echo >>` or some editors write).
    assert memory.path is not None
    text = memory.path.read_text(encoding="utf-8")
    with open(memory.path, "r+", encoding="utf-8") as fh:
        fh.write(text.replace("five times", "seven times"))
        fh.truncate()
    edited = _hook(home, repo, "prompt", {"cwd": str(repo), "session_id": "e3",
                                          "prompt": "why do billing webhooks retry?"})
    assert "retry seven times" in edited.stdout


def test_a_late_request_claims_nothing(home: Path, repo: Path,
                                       daemon: subprocess.Popen[bytes]) -> None:
    payload = json.dumps({"session_id": "late-1", "cwd": str(repo),
                          "prompt": "why do billing webhooks retry?"}).encode()
    head = (f"HOOK prompt text {time.monotonic() - 1!r} {str(home).encode().hex()} "
            f"{str(repo).encode().hex()} {len(payload)}\n").encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(socket_path(home)))
        conn.sendall(head + payload)
        answer = conn.recv(1000)
    assert answer == b"NO late\n"
    assert surfaced(home, "late-1") == set()
    for bad in (b"HOOK prompt text x y z 1\n", b"HOOK nonsense\n", b"HOOK stop text 1 2 3 4\n"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30)
            conn.connect(str(socket_path(home)))
            conn.sendall(bad)
            assert conn.recv(1000) == b"NO bad request\n"
    assert ask(home, {"op": "ping"}) is not None  # still serving


def test_a_hook_without_a_daemon_starts_one_for_the_next(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("Billing webhooks retry five times with exponential backoff", type="fact")
    env = {**_env(home), "MEMDIR_DAEMON": "", "MEMDIR_DAEMON_IDLE": "30"}
    payload = {"session_id": "n1", "cwd": str(repo), "prompt": "why do billing webhooks retry?"}
    first = subprocess.run([sys.executable, "-m", "memdir", "hook", "prompt"],
                           input=json.dumps(payload), capture_output=True, text=True,
                           cwd=repo, timeout=60, env=env)
    assert "Billing webhooks retry" in first.stdout  # recalled in its own process
    try:
        assert wait_until(lambda: ask(home, {"op": "ping"}) is not None, 60), "none started"
        second = subprocess.run([sys.executable, "-X", "importtime", "-m", "memdir", "hook",
                                 "prompt"], input=json.dumps({**payload, "session_id": "n2"}),
                                capture_output=True, text=True, cwd=repo, timeout=60, env=env)
        assert "Billing webhooks retry" in second.stdout
        assert "memdir.memdir" not in second.stderr  # the daemon answered it
    finally:
        answer = ask(home, {"op": "ping"})
        if answer is not None:
            os.kill(int(answer["pid"]), 15)
            assert wait_until(lambda: not socket_path(home).exists(), 10)


# -- the directory watch ---------------------------------------------------------------------


@LINUX
def test_the_watch_is_quiet_only_when_nothing_changed(tmp_path: Path) -> None:
    folder = tmp_path / "memories"
    folder.mkdir()
    (folder / "a.md").write_text("one")
    watch = DirWatch([folder, tmp_path / "later" / "team"])
    assert watch.active
    assert not watch.quiet()  # nothing reconciled under the watch yet
    assert watch.quiet() and watch.quiet()
    with open(folder / "a.md", "r+") as fh:  # in place, same size
        fh.write("two")
    assert not watch.quiet() and watch.quiet()
    (folder / "b.md").write_text("new")
    assert not watch.quiet() and watch.quiet()
    os.rename(folder / "b.md", folder / "c.md")
    assert not watch.quiet()
    (folder / "c.md").unlink()
    assert not watch.quiet() and watch.quiet()
    # A directory that did not exist: its coming, then a file in it, are changes.
    (tmp_path / "later" / "team").mkdir(parents=True)
    assert not watch.quiet()
    watch.quiet()
    (tmp_path / "later" / "team" / "x.md").write_text("team memory")
    assert not watch.quiet() and watch.quiet()
    # The watched directory replaced: noticed, and the new one watched.
    os.rename(folder, tmp_path / "old")
    folder.mkdir()
    assert not watch.quiet()
    watch.quiet()
    (folder / "d.md").write_text("after")
    assert not watch.quiet()
    watch.close()
    assert not watch.active and not watch.quiet()


@LINUX
def test_a_store_with_a_watch_skips_the_reconcile_until_a_change(home: Path,
                                                                 repo: Path) -> None:
    with Memdir(home=home, project=repo, sync_interval=0) as md:
        md.store("Deploys go out on Tuesdays", type="fact")
        md._watch = DirWatch([md.directory("project").path])
        assert not md.reconcile() and md._watch.quiet() is True
        folder = md.directory("project").path
        (folder / "fact_hand.md").write_text(
            "---\nname: Hand\ndescription: by hand\ntype: fact\n---\nWritten by hand.\n")
        assert md.reconcile()  # the new file is indexed ...
        assert [h.memory.body for h in md.search("hand")] == ["Written by hand."]
        assert not md.reconcile()  # ... and then there is nothing more to do


# -- Claude Code's HTTP hooks ----------------------------------------------------------------


@pytest.fixture
def web(home: Path, repo: Path) -> Iterator[tuple[int, str]]:
    from memdir.agents.http_hooks import create

    with Memdir(home=home, project=repo) as md:
        md.store("Billing webhooks retry five times with exponential backoff", type="fact")
    target = create(home)
    assert create(home) == target  # the same port and token on every install
    assert (home / "daemon" / "http.json").stat().st_mode & 0o077 == 0
    with running_daemon(home):
        yield target.port, target.token


def _post(port: int, path: str, body: bytes, headers: dict[str, str],
          method: str = "POST") -> tuple[int, dict[str, object]]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def test_the_http_hook_recalls_and_refuses_what_claude_code_would_not_send(
        home: Path, repo: Path, web: tuple[int, str]) -> None:
    port, token = web
    event = json.dumps({"session_id": "h1", "cwd": str(repo), "hook_event_name":
                        "UserPromptSubmit", "prompt": "why do billing webhooks retry?"}).encode()
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    status, answer = _post(port, "/memdir/hooks/prompt", event, auth)
    assert status == 200
    shown = answer["hookSpecificOutput"]
    assert isinstance(shown, dict) and shown["hookEventName"] == "UserPromptSubmit"
    assert "retry five times" in str(shown["additionalContext"])
    assert surfaced(home, "h1")
    assert _post(port, "/memdir/hooks/prompt", event, auth) == (200, {})  # once a session
    for headers, expected in (({}, 401), ({"Authorization": "Bearer " + "x" * len(token)}, 401),
                              ({**auth, "Origin": "https://evil.example"}, 403),
                              ({**auth, "Host": "evil.example:80"}, 403)):
        status, answer = _post(port, "/memdir/hooks/prompt", event.replace(b"h1", b"h2"),
                               headers)
        assert status == expected and "error" in answer
    assert surfaced(home, "h2") == set()  # nothing recalled for a refused call
    assert _post(port, "/memdir/hooks/nothing", event, auth)[0] == 404
    assert _post(port, "/memdir/hooks/prompt", b"", auth, method="GET")[0] == 405
    # A chunked body (no Content-Length) is read too.
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        other = event.replace(b"h1", b"h3")
        conn.sendall(f"POST /memdir/hooks/prompt HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     f"Authorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\n\r\n"
                     f"{len(other[:10]):x}\r\n".encode() + other[:10] + b"\r\n"
                     + f"{len(other[10:]):x}\r\n".encode() + other[10:] + b"\r\n0\r\n\r\n")
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200") and b"retry five times" in reply
    # A client that stalls mid-request gets a 400 when its time is up; the daemon goes on.
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b"POST /memdir/hooks/prompt HTTP/1.1\r\nHost: 127.0.0.1")
        stalled = conn.recv(65536)
    assert stalled.startswith(b"HTTP/1.1 400")
    # Stop goes to a background process, as the command hook does; the answer is at once.
    stop = json.dumps({"session_id": "h1", "cwd": str(repo), "transcript_path": "",
                       "stop_hook_active": False}).encode()
    assert _post(port, "/memdir/hooks/stop", stop, auth) == (200, {})
    assert ask(home, {"op": "ping"}) is not None  # still serving the unix socket too


def test_http_hooks_are_claude_codes_and_user_scope_only(home: Path, repo: Path) -> None:
    from memdir.agents.hooks_install import install
    from memdir.core.errors import ConfigError

    with pytest.raises(ConfigError, match="Codex runs command hooks only"):
        install("codex", http=True, dry_run=True, mcp=False)
    with pytest.raises(ConfigError, match="may be committed") as refused:
        install("claude-code", "project", project=repo, http=True, dry_run=True, mcp=False)
    assert "--scope user" in refused.value.hint
    assert not (repo / ".claude").exists()  # nothing written


def test_doctor_says_when_nothing_or_something_else_listens_for_the_http_hooks(
        home: Path, repo: Path) -> None:
    from memdir.agents.http_hooks import create, load

    def doctor() -> tuple[int, list[dict[str, str]]]:
        done = subprocess.run([sys.executable, "-m", "memdir", "doctor", "--json"], cwd=repo,
                              capture_output=True, text=True, timeout=60, env=_env(home))
        return done.returncode, [p for p in json.loads(done.stdout)
                                 if p["kind"].startswith("http-hooks")]

    with Memdir(home=home, project=repo) as md:
        md.store("Deploys go out on Tuesdays", type="fact")
    assert doctor() == (0, [])  # no HTTP hooks set up: nothing to say
    target = create(home)
    code, found = doctor()
    assert code == 0 and [p["kind"] for p in found] == ["http-hooks"]  # a notice
    assert "no action needed between sessions" in found[0]["message"]
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        squatter.bind(("127.0.0.1", target.port))
        squatter.listen(1)
        code, found = doctor()
        assert code == 1 and [p["kind"] for p in found] == ["http-hooks-port"]
        assert "install --agent claude-code --http" in found[0]["hint"]
        moved = create(home)  # what that install does: a free port, a new token
        assert moved.port != target.port and moved.token != target.token
        assert load(home) == moved
    finally:
        squatter.close()


def test_install_http_then_command_hooks_then_uninstall(home: Path, repo: Path) -> None:
    from memdir.agents.hooks_install import install, status, uninstall

    settings = Path.home() / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = {"type": "command", "command": "echo mine", "timeout": 5}
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [mine]}]}}))
    settings.chmod(0o644)
    report = install("claude-code", mcp=False, http=True)
    assert any("not running (MEMDIR_DAEMON=0?)" in n for n in report.notes)
    assert settings.stat().st_mode & 0o777 == 0o600
    hooks = json.loads(settings.read_text())["hooks"]
    assert hooks["UserPromptSubmit"][0]["hooks"] == [mine]  # the user's own hook stays
    [web] = hooks["UserPromptSubmit"][1]["hooks"]
    assert web["type"] == "http" and web["url"].endswith("/memdir/hooks/prompt")
    assert hooks["SessionStart"][-1]["hooks"][0]["type"] == "command"
    assert all(s.current for s in status("claude-code").hooks)
    assert not install("claude-code", mcp=False, http=True).changed  # idempotent
    assert (home / "daemon" / "http.json").exists()
    install("claude-code", mcp=False)  # back to command hooks, in place
    assert not (home / "daemon" / "http.json").exists()  # doctor asks for no daemon now
    hooks = json.loads(settings.read_text())["hooks"]
    assert [g["hooks"][0]["type"] for g in hooks["UserPromptSubmit"]] == ["command", "command"]
    assert "hook prompt" in hooks["UserPromptSubmit"][1]["hooks"][0]["command"]
    assert all(s.current for s in status("claude-code").hooks)
    install("claude-code", mcp=False, http=True)
    uninstall("claude-code")
    assert not (home / "daemon" / "http.json").exists()
    assert json.loads(settings.read_text())["hooks"] == {"UserPromptSubmit": [{"hooks": [mine]}]}


def test_a_request_that_fails_never_ends_the_daemon(home: Path, repo: Path,
                                                    daemon: subprocess.Popen[bytes]) -> None:
    # A home with a NUL byte makes the daemon's path check raise, not answer.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(socket_path(home)))
        conn.sendall(json.dumps({"op": "ping", "home": "bad\x00home"}).encode() + b"\n")
        conn.recv(1000)
    assert ask(home, {"op": "ping"}) is not None and daemon.poll() is None
    assert "a request failed: ValueError" in hooks_log(home)


def test_the_http_hooks_token_is_never_read_or_written_through_a_symlink(
        home: Path, tmp_path: Path) -> None:
    from memdir.agents.http_hooks import create, load
    from memdir.core.errors import UnsafeFileError

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = elsewhere / "http.json"
    planted.write_text(json.dumps({"port": 4242, "token": "t" * 40}))
    (home / "daemon").mkdir(parents=True)
    (home / "daemon" / "http.json").symlink_to(planted)
    assert load(home) is None  # a planted token is not taken
    made = create(home)  # a real file replaces the link; the planted one is untouched
    assert not (home / "daemon" / "http.json").is_symlink() and load(home) == made
    assert json.loads(planted.read_text())["port"] == 4242
    other = tmp_path / "other-home"
    other.mkdir()
    (other / "daemon").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeFileError):
        create(other)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["http.json"]
