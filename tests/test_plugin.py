"""The Claude Code plugin in plugins/memdir, and an end-to-end scenario through its hooks:
session 1 states a preference and a correction; session 2 starts with both and recalls a
relevant memory exactly once."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugins" / "memdir"
EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "prompt", "Stop": "stop",
          "PreCompact": "pre-compact", "SessionEnd": "session-end"}


def _hooks() -> dict[str, list[dict[str, object]]]:
    data = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())
    hooks = data["hooks"]
    assert isinstance(hooks, dict)
    return hooks


def test_manifests_are_valid() -> None:
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "memdir" and re.fullmatch(r"\d+\.\d+\.\d+", manifest["version"])
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert (ROOT / market["plugins"][0]["source"]).resolve() == PLUGIN
    mcp = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]["memdir"]
    assert [mcp["command"], *mcp["args"]] == ["memdir", "mcp"]


def test_hooks_cover_every_event_and_compaction() -> None:
    hooks = _hooks()
    assert set(hooks) == set(EVENTS)
    assert set(hooks["SessionStart"][0]["matcher"].split("|")) == {  # type: ignore[union-attr]
        "startup", "resume", "clear", "compact"}
    for name, groups in hooks.items():
        command = groups[0]["hooks"][0]["command"]  # type: ignore[index]
        assert command == f"memdir hook {EVENTS[name]}"


def _run(command: str, payload: dict[str, object], home: Path, cwd: Path,
         ) -> subprocess.CompletedProcess[str]:
    """Run a hook command as Claude Code would: a shell command with the JSON on stdin, with
    the `memdir` of this environment on PATH."""
    bindir = Path(sys.executable).parent
    env = {**os.environ, "MEMDIR_HOME": str(home),
           "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(shlex.split(command), input=json.dumps(payload), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_slash_command_subcommands_are_real(tmp_path: Path) -> None:
    text = (PLUGIN / "commands" / "memory.md").read_text()
    front = text.split("---")[1]
    assert "description:" in front and "allowed-tools: Bash(memdir:*)" in front
    for sub in ("store", "search", "about", "decisions", "recent", "context"):
        assert f"`memdir {sub}" in text
        result = subprocess.run([sys.executable, "-m", "memdir", sub, "--help"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (sub, result.stderr)


def _transcript(path: Path, session: str, turns: list[tuple[str, str]]) -> Path:
    lines = [json.dumps({"type": role, "uuid": f"{session}-{n}", "sessionId": session,
                         "timestamp": f"2026-11-20T10:00:{n:02d}Z",
                         "message": {"role": role, "content": text}})
             for n, (role, text) in enumerate(turns)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_two_sessions_end_to_end(tmp_path: Path, home: Path, repo: Path) -> None:
    hooks = {name: groups[0]["hooks"][0]["command"]  # type: ignore[index]
             for name, groups in _hooks().items()}
    # Session 1: the user states a preference and corrects the agent.
    s1 = _transcript(tmp_path / "s1.jsonl", "s1", [
        ("user", "Set up the frontend build for the dashboard."),
        ("assistant", "I'll use npm to install the dependencies."),
        ("user", "I prefer pnpm over npm for every JavaScript project."),
        ("assistant", "Switching to pnpm. I'll put the config in webpack.config.js."),
        ("user", "Actually, we use Vite for the dashboard, not webpack."),
        ("assistant", "Understood, Vite it is."),
    ])
    base = {"session_id": "s1", "cwd": str(repo), "transcript_path": str(s1)}
    start = _run(hooks["SessionStart"], {**base, "source": "startup"}, home, repo)
    assert start.returncode == 0 and "First session" in start.stdout  # nothing stored yet
    for event in ("Stop", "PreCompact"):
        result = _run(hooks[event], {**base, "stop_hook_active": False}, home, repo)
        assert result.returncode == 0 and result.stdout == ""
    # Session 2 starts with both memories in its context.
    base2 = {"session_id": "s2", "cwd": str(repo), "transcript_path": ""}
    start2 = _run(hooks["SessionStart"], {**base2, "source": "startup"}, home, repo)
    assert start2.returncode == 0
    assert "pnpm over npm" in start2.stdout, start2.stdout
    assert "Vite for the dashboard" in start2.stdout, start2.stdout
    assert "First session" not in start2.stdout
    # The context showed the Vite correction: a prompt of that session does not repeat it.
    prompt = {**base2, "prompt": "Which bundler does the dashboard use for its build?"}
    shown = _run(hooks["UserPromptSubmit"], prompt, home, repo)
    assert shown.returncode == 0 and "Vite" not in shown.stdout
    # In a session without that context, the prompt recalls it, and only once.
    prompt = {**prompt, "session_id": "s3"}
    first = _run(hooks["UserPromptSubmit"], prompt, home, repo)
    assert first.returncode == 0 and "Vite" in first.stdout
    assert first.stdout.count("<system-reminder>") >= 1
    second = _run(hooks["UserPromptSubmit"], prompt, home, repo)
    assert second.returncode == 0 and "Vite" not in second.stdout
    # State never lands in the plugin directory.
    assert not [p for p in PLUGIN.rglob("*") if p.suffix in (".sqlite", ".log", ".jsonl")]


@pytest.mark.parametrize("event", list(EVENTS))
def test_plugin_hooks_fail_open(tmp_path: Path, home: Path, event: str) -> None:
    command = _hooks()[event][0]["hooks"][0]["command"]  # type: ignore[index]
    result = _run(command, {"session_id": "x", "transcript_path": str(tmp_path / "missing"),
                            "cwd": str(tmp_path / "gone")}, home, tmp_path)
    assert result.returncode == 0 and result.stderr == ""
