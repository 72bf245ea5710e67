"""`memdir hooks install|uninstall` with settings the user shaped: memdir hooks they
customised, numbers JSON reads imprecisely, files that were there but empty. Real files in
the temporary HOME conftest makes for every test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memdir import Memdir
from memdir.agents.hooks_agents import hook_action
from memdir.agents.hooks_install import BACKUP_SUFFIX, install, status, uninstall

PY = sys.executable


def settings_path() -> Path:
    return Path.home() / ".claude" / "settings.json"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def memdir_commands(event: str) -> list[str]:
    data = json.loads(settings_path().read_text())
    return [e["command"] for g in data["hooks"].get(event, []) for e in g["hooks"]
            if hook_action(e) is not None]


def group(command: str, **extra: Any) -> dict[str, Any]:
    return {"hooks": [{"type": "command", "command": command, **extra}]}


ENV_PROMPT = "env MEMDIR_HOME=/data/memdir memdir hook prompt"
HOME_STOP = f"{PY} -m memdir hook stop --home /data/memdir"
HOME_FIRST = f"{PY} -m memdir hook --home /data/memdir --format json session-start"


def test_customised_memdir_hooks_are_left_alone_and_not_doubled() -> None:
    write(settings_path(), json.dumps({"hooks": {
        "UserPromptSubmit": [group(ENV_PROMPT, timeout=20)],
        "Stop": [group("notify-send done"), group(HOME_STOP)],
        "SessionStart": [group(HOME_FIRST)],
    }}, indent=2) + "\n")
    report = install("claude-code", python=PY)
    assert memdir_commands("UserPromptSubmit") == [ENV_PROMPT]  # not rewritten
    assert memdir_commands("Stop") == [HOME_STOP]  # no second memdir entry
    assert memdir_commands("SessionStart") == [HOME_FIRST]
    assert memdir_commands("PreCompact") == [f"{PY} -m memdir hook pre-compact"]
    data = json.loads(settings_path().read_text())
    assert data["hooks"]["UserPromptSubmit"] == [group(ENV_PROMPT, timeout=20)]
    assert report.files[0].changes == ("added PreCompact hook", "added SessionEnd hook")
    kept = [n for n in report.notes if "customised" in n]
    assert [n.rsplit(": ", 1)[1] for n in kept] == [HOME_FIRST, ENV_PROMPT, HOME_STOP]
    assert all(str(settings_path()) in n for n in kept)

    before = settings_path().read_bytes()
    again = install("claude-code", python=PY)
    assert settings_path().read_bytes() == before and not again.files[0].changes
    assert status("claude-code", python=PY).installed  # what install leaves is current

    removed = uninstall("claude-code")
    # HOME_STOP is the form install writes to carry a home: removed, not called customised.
    assert sorted(n.rsplit(": ", 1)[1] for n in removed.notes) == sorted(
        [HOME_FIRST, ENV_PROMPT])
    assert all(n.startswith("removed a memdir hook you had customised") for n in removed.notes)
    data = json.loads(settings_path().read_text())
    # The event lists were in the file before memdir: emptied, not deleted.
    assert data == {"hooks": {"UserPromptSubmit": [], "Stop": [group("notify-send done")],
                              "SessionStart": []}}


def test_a_plain_memdir_hook_beside_a_customised_one_is_still_updated() -> None:
    write(settings_path(), json.dumps({"hooks": {"Stop": [
        group("/old/venv/bin/python -m memdir hook stop", timeout=30), group(HOME_STOP)]}}))
    install("claude-code", python=PY)
    assert memdir_commands("Stop") == [f"{PY} -m memdir hook stop", HOME_STOP]


@pytest.mark.parametrize(("command", "action"), [
    ("memdir hook --home /x prompt", "prompt"),
    ("memdir --home /x hook prompt", "prompt"),
    (f"{PY} -m memdir --home=/x --project /p hook stop", "stop"),
    ("memdir --home", None),
    ("memdir --home /x search prompt", None),
    ("memdir hook prompt --home=/x", "prompt"),
    (f"{PY} -X utf8 -I -m memdir hook stop", "stop"),
    ("env -u FOO MEMDIR_DEBUG=1 memdir hook stop --format json", "stop"),
    ("memdir hook --home", None),
    ("memdir hook --home /x", None),
    ("memdir hook stop extra", None),
    ("memdir hook stop; rm -rf /tmp/x", None),
])
def test_customised_commands_are_recognised(command: str, action: str | None) -> None:
    assert hook_action({"type": "command", "command": command}) == action


def test_a_hook_with_options_before_hook_is_customised_and_kept() -> None:
    before = "memdir --home /data/memdir hook prompt"
    write(settings_path(), json.dumps({"hooks": {
        "UserPromptSubmit": [group(before)]}}, indent=2) + "\n")
    install("claude-code", python=PY)
    assert memdir_commands("UserPromptSubmit") == [before]  # neither rewritten nor doubled
    uninstall("claude-code")
    assert memdir_commands("UserPromptSubmit") == []  # recognised as memdir's: removed


def test_a_hook_option_before_the_event_is_not_the_event(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("Never force-push to the main branch", type="policy")
    payload = json.dumps({"session_id": "h1", "cwd": str(repo), "source": "startup"})
    env = {k: v for k, v in os.environ.items() if k != "MEMDIR_HOME"}
    result = subprocess.run([sys.executable, "-m", "memdir", "hook", "--home", str(home),
                             "--format", "json", "session-start"], input=payload,
                            capture_output=True, text=True, cwd=repo, env=env, timeout=60)
    assert result.returncode == 0 and result.stderr == ""
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Never force-push" in context


NUMBERS = """{
  "huge": 1e400,
  "exact": 1.50,
  "big": 123456789012345678901234567890,
  "list": [
    1E5,
    -0,
    -0.0,
    2.5e-3
  ],
  "hooks": {}
}
"""


def _strict(text: str) -> Any:
    def refuse(word: str) -> Any:
        raise ValueError(f"{word} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_numbers_are_written_back_as_they_were_written() -> None:
    write(settings_path(), NUMBERS)
    install("claude-code", python=PY)
    text = settings_path().read_text()
    _strict(text)  # valid JSON: no Infinity
    for literal in ('"huge": 1e400', '"exact": 1.50', "123456789012345678901234567890",
                    "1E5", "-0,", "-0.0", "2.5e-3"):
        assert literal in text, literal
    assert status("claude-code", python=PY).installed
    uninstall("claude-code")
    assert settings_path().read_text() == NUMBERS


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
@pytest.mark.parametrize("text", ["", "\n"])
def test_a_file_that_was_there_empty_stays_after_uninstall(agent: str, text: str) -> None:
    if agent == "claude-code":
        files = [settings_path(), Path.home() / ".claude.json"]
    else:
        files = [Path.home() / ".codex" / "hooks.json", Path.home() / ".codex" / "config.toml"]
    for path in files:
        write(path, text)
    assert [f.status for f in install(agent, python=PY).files] == ["updated", "updated"]
    report = uninstall(agent)
    assert [f.status for f in report.files] == ["updated", "updated"]
    for path in files:
        assert path.read_bytes() == text.encode()
        assert path.with_name(path.name + BACKUP_SUFFIX).read_bytes() == text.encode()
    install(agent, python=PY)  # and again: the backup still tells the file was there
    uninstall(agent)
    assert all(path.read_bytes() == text.encode() for path in files)


def test_a_file_memdir_created_is_still_removed() -> None:
    install("claude-code", python=PY)
    install("claude-code", python="/other/python")
    assert [f.status for f in uninstall("claude-code").files] == ["removed", "removed"]
    assert not settings_path().exists()
    assert sorted(p.name for p in Path.home().rglob("*")) == [".claude"]


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_timeout_the_user_raised_survives_a_reinstall(agent: str, repo: Path) -> None:
    # A plain memdir hook whose timeout the user raised (prompt: 10 -> 30), from an older
    # interpreter: install updates memdir's command and keeps the user's timeout.
    hooks_file = Path.home() / (".claude/settings.json" if agent == "claude-code"
                                else ".codex/hooks.json")
    # The default home: no --home in the commands (test_hooks_install_home.py has those).
    env = {k: v for k, v in os.environ.items() if k != "MEMDIR_HOME"}
    env["HOME"] = str(Path.home())

    def memdir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memdir", "hooks", *args, "--agent", agent],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=60)

    assert memdir("install").returncode == 0
    data = json.loads(hooks_file.read_text())
    prompt = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    assert prompt["timeout"] == 10  # memdir's default
    prompt.update(command="/old/venv/bin/python -m memdir hook prompt", timeout=30)
    data["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 45.5
    write(hooks_file, json.dumps(data, indent=2) + "\n")

    result = memdir("install")
    assert result.returncode == 0, result.stderr
    data = json.loads(hooks_file.read_text())
    prompt = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    assert prompt == {"type": "command", "command": f"{PY} -m memdir hook prompt",
                      "timeout": 30}
    assert data["hooks"]["Stop"][0]["hooks"][0]["timeout"] == 45.5
    assert data["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] == 10
    assert "updated UserPromptSubmit hook" in result.stdout
    assert (f"note: kept your timeout of the memdir hook in {hooks_file}: UserPromptSubmit: 30 s"
            " (memdir's default: 10 s)") in result.stdout
    assert "Stop: 45.5 s (memdir's default: 30 s)" in result.stdout
    assert "SessionStart: " not in result.stdout

    before = hooks_file.read_bytes()
    again = memdir("install", "--json")
    assert again.returncode == 0 and hooks_file.read_bytes() == before
    assert json.loads(again.stdout)["files"][0]["status"] == "unchanged"
    status = memdir("status")
    assert status.returncode == 0 and "UserPromptSubmit  installed" in status.stdout

    # A timeout that is not a positive number is not a usable choice: memdir's comes back.
    data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["timeout"] = "soon"
    write(hooks_file, json.dumps(data, indent=2) + "\n")
    assert memdir("install").returncode == 0
    data = json.loads(hooks_file.read_text())
    assert data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["timeout"] == 10
