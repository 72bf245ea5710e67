"""`memdir hooks install` with a memdir home that is not the default (``MEMDIR_HOME`` or
``--home``): the installed hook commands and MCP server name it, quoted for the shell, so the
agent reads that home whatever its own environment. The hooks are run as the agents run
them, through a real shell, with real settings files in the temporary HOME conftest makes;
the MCP entry is started as the agent starts it and asked over stdio."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from memdir import Memdir
from memdir.agents.hooks_agents import HOOKS
from memdir.agents.hooks_install import carried_home, install, status

PY = sys.executable
# Spaces, both quotes, a dollar sign, a backquote, a backslash: what a shell would act on.
ODD = "my memdir $HOME 'one' \"two\" `three` back\\slash"
AGENT_FILES = {"claude-code": (".claude/settings.json", ".claude.json"),
               "codex": (".codex/hooks.json", ".codex/config.toml")}


def agent_env(**extra: str) -> dict[str, str]:
    """The agent's environment: no MEMDIR_HOME (the agent was not started from that shell)."""
    env = {k: v for k, v in os.environ.items() if k != "MEMDIR_HOME"}
    return {**env, "HOME": str(Path.home()), **extra}


def cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "memdir", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def commands(agent: str) -> dict[str, str]:
    data = json.loads((Path.home() / AGENT_FILES[agent][0]).read_text())
    return {event: groups[-1]["hooks"][-1]["command"]
            for event, groups in data["hooks"].items()}


def mcp_entry(agent: str) -> dict[str, Any]:
    path = Path.home() / AGENT_FILES[agent][1]
    if agent == "codex":
        return dict(tomllib.loads(path.read_text())["mcp_servers"]["memdir"])
    return dict(json.loads(path.read_text())["mcpServers"]["memdir"])


def odd_home(tmp_path: Path) -> Path:
    home = tmp_path / ODD
    with Memdir(home=home, project=tmp_path / "repo") as md:
        md.store("Deployments go through ArgoCD, never kubectl apply", type="decision",
                 relevance="high")
    return home


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_the_installed_hooks_read_the_home_given_by_memdir_home(agent: str, tmp_path: Path,
                                                                 repo: Path) -> None:
    home = odd_home(tmp_path)
    result = cli("hooks", "install", "--agent", agent, cwd=repo,
                 env=agent_env(MEMDIR_HOME=str(home)))
    assert result.returncode == 0, result.stderr
    assert f"the installed commands read the memdir home {home}" in result.stdout
    installed = commands(agent)
    assert set(installed) == {spec.event for spec in HOOKS}
    for spec in HOOKS:
        assert shlex.split(installed[spec.event]) == [PY, "-m", "memdir", "hook", spec.action,
                                                      "--home", str(home)]
    # The session-start hook, run by a real shell as the agent runs it, without MEMDIR_HOME:
    # it reads the odd home, not the default one (which has no memories: onboarding).
    payload = json.dumps({"session_id": "s1", "cwd": str(repo), "source": "startup",
                          "hook_event_name": "SessionStart"})
    ran = subprocess.run(["sh", "-c", installed["SessionStart"]], input=payload, cwd=repo,
                         env=agent_env(), capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stderr == ""
    assert "Deployments go through ArgoCD" in ran.stdout
    assert not (Path(os.environ["XDG_DATA_HOME"]) / "memdir").exists()  # the default: untouched

    server = mcp_entry(agent)
    assert [server["command"], *server["args"]] == [PY, "-m", "memdir", "mcp", "--home",
                                                    str(home)]
    # The status, asked the same way, is current; installing again changes nothing.
    files = [Path.home() / name for name in AGENT_FILES[agent]]
    before = [f.read_bytes() for f in files]
    again = cli("hooks", "install", "--agent", agent, "--json", cwd=repo,
                env=agent_env(MEMDIR_HOME=str(home)))
    assert [f["status"] for f in json.loads(again.stdout)["files"]] == ["unchanged"] * 2
    assert [f.read_bytes() for f in files] == before
    assert status(agent, python=PY, home=home).installed


def test_the_mcp_entry_starts_a_server_on_that_home(tmp_path: Path, repo: Path) -> None:
    home = odd_home(tmp_path)
    assert install("claude-code", python=PY, home=home).changed
    server = mcp_entry("claude-code")
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory_recall", "arguments": {"query": "how do we deploy?"}}},
    ]
    proc = subprocess.Popen([server["command"], *server["args"]], cwd=repo, env=agent_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
    proc.stdin.flush()
    answers: dict[int, Any] = {}
    while 2 not in answers:  # stdin stays open until the answer: EOF would end the session
        line = proc.stdout.readline()
        assert line, "the server closed stdout early"
        message = json.loads(line)
        if "id" in message:
            answers[message["id"]] = message
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "ArgoCD" in json.dumps(answers[2]["result"])


def test_home_flag_is_carried_too_and_a_new_home_replaces_the_old(tmp_path: Path,
                                                                   repo: Path) -> None:
    first, second = tmp_path / "first home", tmp_path / "second"
    env = agent_env()
    assert cli("hooks", "install", "--agent", "claude-code", "--home", str(first), cwd=repo,
               env=env).returncode == 0
    assert commands("claude-code")["Stop"] == f"{PY} -m memdir hook stop --home '{first}'"
    result = cli("hooks", "install", "--agent", "claude-code", cwd=repo,
                 env=agent_env(MEMDIR_HOME=str(second)))
    assert result.returncode == 0 and "updated Stop hook" in result.stdout
    data = json.loads((Path.home() / ".claude/settings.json").read_text())
    assert [g["hooks"][0]["command"] for g in data["hooks"]["Stop"]] == [
        f"{PY} -m memdir hook stop --home {second}"]  # rewritten in place, not doubled
    assert mcp_entry("claude-code")["args"] == ["-m", "memdir", "mcp", "--home", str(second)]
    # Without a home now, the hooks naming one are left as they are, and said so.
    plain = cli("hooks", "install", "--agent", "claude-code", cwd=repo, env=env)
    assert "left your customised memdir hook as it is" in plain.stdout
    assert commands("claude-code")["Stop"] == f"{PY} -m memdir hook stop --home {second}"


def test_a_home_the_hooks_find_by_themselves_is_not_carried(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            repo: Path) -> None:
    default = Path(os.environ["XDG_DATA_HOME"]) / "memdir"
    monkeypatch.setenv("MEMDIR_HOME", str(default))
    assert carried_home(None) is None
    install("claude-code", python=PY, home=carried_home(None))
    assert commands("claude-code")["Stop"] == f"{PY} -m memdir hook stop"
    # The config file's home is what a hook reads without MEMDIR_HOME: not carried either.
    configured = tmp_path / "configured"
    config = tmp_path / "config.toml"
    config.write_text(f"home = {json.dumps(str(configured))}\n")
    monkeypatch.setenv("MEMDIR_CONFIG", str(config))
    monkeypatch.setenv("MEMDIR_HOME", str(configured))
    assert carried_home(None) is None
    assert carried_home(str(default)) == default  # now not the one found by itself
    monkeypatch.delenv("MEMDIR_HOME")
    assert carried_home(None) is None
    assert carried_home("relative") == (Path.cwd() / "relative").resolve()
