"""memdir inside the real agents: Claude Code and Codex, installed from npm by install.sh
into ``.clients/``, run against fake model APIs on 127.0.0.1 (tests/model_servers.py) in a
temporary HOME and git repository; the assertions are on what the *model received*.

For each client, after ``memdir hooks install`` (and nothing else; no bypass flag):
session-start context within the host's cap, per-prompt recall carrying the right memory,
memdir's MCP tools offered and one called successfully, the stop hook's use record and the
session-end index. Codex without trust: no hook runs, and ``memdir doctor`` says why. The
Claude Code plugin in ``plugins/`` is loaded by the real client too.

Where a client is missing the tests skip with the reason; under ``CI=true`` that is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import git
from memdir import Memdir
from memdir.agents.hook_output import MAX_CHARS
from model_servers import AnthropicServer, ResponsesServer, Turn

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / ".clients" / "node_modules" / ".bin"
PYTHON_BIN = str(Path(sys.executable).parent)
PNPM = "Use pnpm, never npm, in this repo"
ROTATION = "The staging deploy key rotates every 45 days; Priya approves each rotation"
PROMPT = "Which package manager do we use, and when does the staging deploy key rotate?"


def _client(name: str) -> Path:
    path = CLIENTS / name
    if path.exists():
        return path
    reason = (f"{name} is not installed in {CLIENTS}: run `sh install.sh` (it needs Node.js "
              "20+ and npm)")
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A HOME, a git repository and a memdir home with the memories the prompts ask about:
    many strong feedback memories (more than the session-start budget holds) and the key
    rotation one, which only recall brings."""
    home = tmp_path / "home"
    home.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    env = {**os.environ, "HOME": str(home), "MEMDIR_HOME": str(home / ".memdir"),
           "PATH": os.pathsep.join([str(CLIENTS), PYTHON_BIN, os.environ.get("PATH", "")]),
           "MEMDIR_DAEMON": "0", "NO_COLOR": "1"}
    env.pop("CODEX_HOME", None)
    with Memdir(home / ".memdir", repo) as md:
        pnpm = md.store(PNPM, type="preference", relevance=1.0)
        parts = ("billing search auth export import ledger report alert quota invoice "
                 "catalog profile session webhook backup schema").split()
        md.store_many([{"content": f"Review rule {n}: every change to the {part} module needs "
                                   "a second reviewer, a changelog line and a passing "
                                   "integration run before it merges",
                        "type": "feedback", "relevance": 0.9}
                       for n, part in enumerate(parts * 3)])
        rotation = md.store(ROTATION, type="reference", relevance=0.3)
    yield {"home": home, "repo": repo, "env": env, "pnpm": pnpm.id, "rotation": rotation.id}


def _run(args: list[str], world: dict[str, Any], timeout: float = 180) -> str:
    found = subprocess.run(args, cwd=world["repo"], env=world["env"], capture_output=True,
                           text=True, timeout=timeout)
    assert found.returncode == 0, f"{args[0]} failed:\n{found.stdout}\n{found.stderr}"
    return found.stdout + found.stderr


def _memdir(world: dict[str, Any], *args: str) -> str:
    return _run([sys.executable, "-m", "memdir", *args], world, timeout=120)


def _wait(predicate: Any, seconds: float = 30) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.25)
    return bool(predicate())


def _after_session(world: dict[str, Any]) -> None:
    """The stop hook's use record and the session-end index (a background process)."""
    with Memdir(world["home"] / ".memdir", world["repo"]) as md:
        assert md.get(world["pnpm"]).used_count >= 1  # the answer followed it
        assert md.get(world["rotation"]).used_count == 0  # recalled, not followed

        def indexed() -> bool:
            return bool(md.search("staging deploy key", sources=["sessions"]))

        assert _wait(indexed), "the session-end hook never indexed the session"


def _start_block(text: str) -> str:
    start = text.find("<memory-context")
    assert start >= 0, "no session-start context reached the model"
    end = text.find("</memory-context>", start)
    return text[start:end + len("</memory-context>")]


# -- Codex -----------------------------------------------------------------------------------


def _codex_config(world: dict[str, Any], server: ResponsesServer) -> None:
    config = world["home"] / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'''model = "gpt-test"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "http://127.0.0.1:{server.port}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"

[projects."{world["repo"]}"]
trust_level = "trusted"
''', encoding="utf-8")
    world["env"]["FAKE_API_KEY"] = "sk-test"


def _texts(request: dict[str, Any]) -> str:
    return json.dumps(request.get("input"), ensure_ascii=False)


def test_codex_receives_memdir_context_recall_and_tools(world: dict[str, Any]) -> None:
    codex = _client("codex")
    script = [Turn(tool="memory_recall", arguments={"query": "pnpm"}),
              Turn("Use pnpm, never npm, in this repo.")]
    with ResponsesServer(script) as server:
        assert isinstance(server, ResponsesServer)
        _codex_config(world, server)
        installed = _memdir(world, "hooks", "install", "--agent", "codex")
        assert "trusted memdir's 5 Codex hooks" in installed
        assert "codex-hooks" not in _memdir(world, "doctor", "--json")
        _run([str(codex), "exec", "--skip-git-repo-check", PROMPT], world)
        first, second = server.model_requests()[:2]
    text = _texts(first)
    start = _start_block(text.replace("\\n", "\n").replace('\\"', '"'))
    assert PNPM in start and len(start) <= MAX_CHARS
    assert ROTATION not in start and ROTATION in text  # per-prompt recall brought it
    memdir_tools = [t for t in first["tools"] if t.get("name") == "mcp__memdir"]
    assert memdir_tools, "memdir's MCP tools were not offered to the model"
    assert "memory_recall" in {t["name"] for t in memdir_tools[0]["tools"]}
    outputs = [item for item in second["input"] if item.get("type") == "function_call_output"]
    assert outputs and PNPM in json.dumps(outputs), "the memory_recall call did not succeed"
    _after_session(world)


def test_codex_without_trust_runs_no_hook_and_doctor_says_why(world: dict[str, Any]) -> None:
    codex = _client("codex")
    with ResponsesServer([Turn("ok")]) as server:
        assert isinstance(server, ResponsesServer)
        _codex_config(world, server)
        installed = _memdir(world, "hooks", "install", "--agent", "codex", "--no-trust")
        assert "type /hooks and trust the memdir hooks" in installed
        doctor = json.loads(subprocess.run(
            [sys.executable, "-m", "memdir", "doctor", "--json"], cwd=world["repo"],
            env=world["env"], capture_output=True, text=True, timeout=120).stdout)
        skipped = [p for p in doctor if p["kind"] == "codex-hooks"]
        assert len(skipped) == 5 and all("untrusted" in p["message"] for p in skipped)
        _run([str(codex), "exec", "--skip-git-repo-check", PROMPT], world)
        [request] = server.model_requests()
    assert "memory-context" not in _texts(request)  # Codex skipped every untrusted hook


# -- Claude Code -----------------------------------------------------------------------------


def _claude_env(world: dict[str, Any], server: AnthropicServer) -> None:
    world["env"].update({"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.port}",
                         "ANTHROPIC_API_KEY": "sk-ant-test", "DISABLE_TELEMETRY": "1",
                         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                         "DISABLE_AUTOUPDATER": "1"})


CLAUDE_SCRIPT = [Turn(tool="ToolSearch", arguments={"query": "select:mcp__memdir__memory_recall"}),
                 Turn(tool="mcp__memdir__memory_recall", arguments={"query": "pnpm"}),
                 Turn("Use pnpm, never npm, in this repo.")]


def _check_claude(server: AnthropicServer) -> None:
    requests = server.model_requests()
    first = json.dumps(requests[0], ensure_ascii=False).replace("\\n", "\n").replace('\\"', '"')
    start = _start_block(first)
    assert PNPM in start and len(start) <= MAX_CHARS
    assert ROTATION not in start and ROTATION in first  # per-prompt recall brought it
    assert "mcp__memdir__memory_recall" in first  # offered (as a deferred tool)
    results = [block for r in requests[1:] for m in r["messages"] if m["role"] == "user"
               and isinstance(m["content"], list) for block in m["content"]
               if block.get("type") == "tool_result"]
    assert any(PNPM in json.dumps(b) for b in results), "the memory_recall call did not succeed"


def test_claude_code_receives_memdir_context_recall_and_tools(world: dict[str, Any]) -> None:
    claude = _client("claude")
    with AnthropicServer(list(CLAUDE_SCRIPT)) as server:
        assert isinstance(server, AnthropicServer)
        _claude_env(world, server)
        _memdir(world, "hooks", "install", "--agent", "claude-code")
        out = _run([str(claude), "-p", PROMPT, "--allowedTools",
                    "mcp__memdir__memory_recall"], world)
        assert "Use pnpm" in out
        _check_claude(server)
    _after_session(world)


def test_the_claude_code_plugin_loaded_by_the_real_client(world: dict[str, Any]) -> None:
    claude = _client("claude")
    with AnthropicServer(list(CLAUDE_SCRIPT)) as server:
        assert isinstance(server, AnthropicServer)
        _claude_env(world, server)
        _run([str(claude), "-p", PROMPT, "--plugin-dir", str(ROOT / "plugins" / "memdir"),
              "--allowedTools", "mcp__plugin_memdir_memdir__memory_recall",
              "mcp__memdir__memory_recall"], world)
        requests = server.model_requests()
    first = json.dumps(requests[0], ensure_ascii=False).replace("\\n", "\n").replace('\\"', '"')
    assert PNPM in _start_block(first) and ROTATION in first
    assert "memory_recall" in first


def test_claude_code_http_hooks_reach_the_warm_daemon(world: dict[str, Any]) -> None:
    claude = _client("claude")
    # The warm daemon serves the HTTP hooks: allowed here (short-lived), stopped at the end.
    world["env"].update(MEMDIR_DAEMON="", MEMDIR_DAEMON_IDLE="120")
    memdir_home = world["home"] / ".memdir"
    settings = world["home"] / ".claude" / "settings.json"
    try:
        with AnthropicServer([Turn("Use pnpm, never npm, in this repo.")]) as server:
            assert isinstance(server, AnthropicServer)
            _claude_env(world, server)
            installed = _memdir(world, "hooks", "install", "--agent", "claude-code", "--http")
            assert "HTTP hooks to the warm daemon" in installed
            assert settings.stat().st_mode & 0o077 == 0  # the token: readable by the user only
            hooks = json.loads(settings.read_text())["hooks"]
            kinds = {event: groups[-1]["hooks"][0]["type"] for event, groups in hooks.items()}
            assert kinds == {"SessionStart": "command", "UserPromptSubmit": "http",
                             "Stop": "http", "PreCompact": "http", "SessionEnd": "http"}
            token = json.loads((memdir_home / "daemon" / "http.json").read_text())["token"]
            assert hooks["UserPromptSubmit"][-1]["hooks"][0]["headers"] == {
                "Authorization": f"Bearer {token}"}
            status = _memdir(world, "hooks", "status", "--agent", "claude-code")
            assert "out of date" not in status and "missing" not in status
            out = _run([str(claude), "-p", PROMPT], world)
            assert "Use pnpm" in out
            first = json.dumps(server.model_requests()[0], ensure_ascii=False)
            first = first.replace("\\n", "\n").replace('\\"', '"')
        assert PNPM in _start_block(first)  # the command hook's context
        assert ROTATION not in _start_block(first) and ROTATION in first  # recall, over HTTP
        # Stop (the use record) and SessionEnd (the index) went over HTTP too.
        _after_session(world)
    finally:
        from memdir.agents.daemon import ask

        answer = ask(memdir_home, {"op": "ping"})
        if answer is not None:
            os.kill(int(answer["pid"]), 15)


def test_codex_with_the_warm_daemon_as_users_run_it(world: dict[str, Any]) -> None:
    codex = _client("codex")
    # The default: the first hook starts the warm daemon, later ones are answered by it.
    world["env"].update(MEMDIR_DAEMON="", MEMDIR_DAEMON_IDLE="120")
    memdir_home = world["home"] / ".memdir"
    from memdir.agents.daemon import ask

    try:
        with ResponsesServer([Turn("Use pnpm, never npm, in this repo."), Turn("ok")]) as server:
            assert isinstance(server, ResponsesServer)
            _codex_config(world, server)
            _memdir(world, "hooks", "install", "--agent", "codex")
            _run([str(codex), "exec", "--skip-git-repo-check", PROMPT], world)
            assert _wait(lambda: ask(memdir_home, {"op": "ping"}) is not None), "no daemon"
            _run([str(codex), "exec", "--skip-git-repo-check", PROMPT], world)
            first, second = server.model_requests()[:2]
        for request in (first, second):  # alone, then through the daemon: the same memory
            text = _texts(request).replace("\\n", "\n").replace('\\"', '"')
            assert PNPM in _start_block(text) and ROTATION in text
    finally:
        answer = ask(memdir_home, {"op": "ping"})
        if answer is not None:
            os.kill(int(answer["pid"]), 15)
