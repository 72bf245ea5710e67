"""`memdir hooks install|uninstall|status`: real settings files in a temporary HOME and project.

conftest points HOME at a fresh directory for every test, so ``Path.home()`` is that directory.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from memdir.agents.hooks_agents import HOOKS, hook_action, hook_command
from memdir.agents.hooks_install import BACKUP_SUFFIX, install, status, uninstall
from memdir.cli import hooks_cli
from memdir.core.errors import ConfigError

PY = sys.executable
OTHER_PY = "/opt/other env/bin/python3"  # a space: the command must quote it

SETTINGS = """{
  "model": "opus",
  "hooks": {
    "SessionStart": [
      {
        "matcher": "startup",
        "hooks": [
          {
            "type": "command",
            "command": "echo hello"
          }
        ]
      }
    ],
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done",
            "timeout": 3
          }
        ]
      }
    ]
  },
  "permissions": {
    "allow": [
      "Bash(ls:*)"
    ]
  }
}
"""

CLAUDE_JSON = '{"numStartups": 3, "mcpServers": {"github": {"command": "npx", "args": ["gh"]}}, ' \
    '"projects": {"/x": {"allowedTools": []}}}'

CONFIG_TOML = """# Codex settings
model = "o3"

[features]
hooks = true  # on

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]

[[profiles.list]]
name = "a"
"""


def home() -> Path:
    return Path.home()


def claude_settings() -> Path:
    return home() / ".claude" / "settings.json"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def ours(event: str, python: str = PY) -> dict[str, Any]:
    spec = next(s for s in HOOKS if s.event == event)
    group: dict[str, Any] = {} if spec.matcher is None else {"matcher": spec.matcher}
    group["hooks"] = [{"type": "command", "command": hook_command(spec.action, python),
                       "timeout": spec.timeout}]
    return group


# -- Claude Code --------------------------------------------------------------------------------


def test_install_merges_memdir_hooks_after_the_users_own() -> None:
    settings = write(claude_settings(), SETTINGS)
    report = install("claude-code", python=PY)

    data = load(settings)
    assert list(data) == ["model", "hooks", "permissions"]
    assert data["permissions"] == {"allow": ["Bash(ls:*)"]}
    original = json.loads(SETTINGS)["hooks"]
    assert data["hooks"] == {
        "SessionStart": [*original["SessionStart"], ours("SessionStart")],
        "Stop": [*original["Stop"], ours("Stop")],
        "UserPromptSubmit": [ours("UserPromptSubmit")],
        "PreCompact": [ours("PreCompact")],
        "SessionEnd": [ours("SessionEnd")],
    }
    assert data["hooks"]["SessionStart"][1] == {
        "matcher": "startup|resume|clear|compact",
        "hooks": [{"type": "command", "command": f"{PY} -m memdir hook session-start",
                   "timeout": 10}]}
    timeouts = {e: g[-1]["hooks"][0]["timeout"] for e, g in data["hooks"].items()}
    assert timeouts == {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 30,
                        "PreCompact": 30, "SessionEnd": 1}
    assert settings.read_text().endswith("}\n")
    assert settings.read_text() == json.dumps(data, indent=2) + "\n"

    assert load(home() / ".claude.json") == {"mcpServers": {"memdir": {
        "type": "stdio", "command": PY, "args": ["-m", "memdir", "mcp"]}}}
    assert [(f.path, f.status) for f in report.files] == [
        (settings, "updated"), (home() / ".claude.json", "created")]
    assert report.files[0].changes == tuple(f"added {s.event} hook" for s in HOOKS)
    assert report.changed


def test_install_twice_changes_nothing_the_second_time() -> None:
    settings = write(claude_settings(), SETTINGS)
    install("claude-code")
    first = (settings.read_bytes(), (home() / ".claude.json").read_bytes())
    again = install("claude-code")
    assert (settings.read_bytes(), (home() / ".claude.json").read_bytes()) == first
    assert [f.status for f in again.files] == ["unchanged", "unchanged"]
    assert not again.changed


def test_install_twice_then_uninstall_gives_back_the_original_file() -> None:
    settings = write(claude_settings(), SETTINGS)
    claude_json = write(home() / ".claude.json", CLAUDE_JSON)  # not 2-space formatted
    install("claude-code")
    install("claude-code")
    report = uninstall("claude-code")
    assert settings.read_text() == SETTINGS
    assert claude_json.read_text() == CLAUDE_JSON  # the original bytes, not a reformatting
    assert [f.status for f in report.files] == ["updated", "updated"]
    assert "removed Stop hook" in report.files[0].changes
    assert uninstall("claude-code").changed is False


def test_uninstall_removes_only_memdir_entries_and_keeps_later_user_edits() -> None:
    original = {"hooks": {"PreCompact": [], "Stop": [{"hooks": [{"type": "command",
                                                                  "command": "say stop"}]}]}}
    settings = write(claude_settings(), json.dumps(original))
    install("claude-code")
    data = load(settings)
    data["theme"] = "dark"  # the user edits the file after installing
    data["hooks"]["UserPromptSubmit"][0]["hooks"].append({"type": "command",
                                                          "command": "log-prompt"})
    data["hooks"]["Notification"] = [{"hooks": [{"type": "command", "command": "beep"}]}]
    write(settings, json.dumps(data, indent=2) + "\n")

    uninstall("claude-code")
    assert load(settings) == {
        "hooks": {
            "PreCompact": [],  # was there before memdir: kept, although empty again
            "Stop": [{"hooks": [{"type": "command", "command": "say stop"}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "log-prompt"}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "beep"}]}],
        },
        "theme": "dark",
    }


def test_files_memdir_created_are_removed_again_and_directories_stay() -> None:
    report = install("claude-code", python=OTHER_PY)
    settings, claude_json = claude_settings(), home() / ".claude.json"
    assert [f.status for f in report.files] == ["created", "created"]
    assert all(f.backup is None for f in report.files)
    assert settings.read_text().startswith('{\n  "hooks": {\n')
    # an empty backup records that there was no file before memdir, through later changes
    assert settings.with_name("settings.json" + BACKUP_SUFFIX).read_text() == ""
    assert [f.status for f in install("claude-code").files] == ["updated", "updated"]
    assert claude_json.with_name(".claude.json" + BACKUP_SUFFIX).read_text() == ""

    report = uninstall("claude-code")
    assert [f.status for f in report.files] == ["removed", "removed"]
    assert not settings.exists() and not claude_json.exists()
    assert sorted(p.name for p in home().rglob("*")) == [".claude"]


def test_backup_is_written_once_before_the_first_change() -> None:
    settings = write(claude_settings(), SETTINGS)
    backup = settings.with_name("settings.json" + BACKUP_SUFFIX)
    report = install("claude-code")
    assert report.files[0].backup == backup
    assert backup.read_text() == SETTINGS
    install("claude-code", python=OTHER_PY)  # a second change: the backup stays the original
    uninstall("claude-code")
    install("claude-code")
    assert backup.read_text() == SETTINGS
    assert sorted(p.name for p in settings.parent.iterdir()) == [
        "settings.json", "settings.json" + BACKUP_SUFFIX]


@pytest.mark.parametrize(("text", "problem"), [
    ('{"hooks": {"Stop": [}', "is not valid JSON: Expecting value at line 1, column 21"),
    ("[1, 2]", "does not hold a JSON object"),
    ('{"hooks": ["Stop"]}', '"hooks" is not a JSON object'),
    ('{"hooks": {"Stop": {"hooks": []}}}', '"hooks.Stop" is not a list'),
])
def test_a_file_of_another_shape_is_refused_and_nothing_is_written(text: str,
                                                                    problem: str) -> None:
    settings = write(claude_settings(), text)
    with pytest.raises(ConfigError) as caught:
        install("claude-code")
    assert str(settings) in caught.value.message and problem in caught.value.message
    assert "memdir changed nothing" in caught.value.hint
    assert settings.read_text() == text
    assert sorted(p.name for p in home().rglob("*")) == [".claude", "settings.json"]


def test_invalid_mcp_file_refuses_before_the_hooks_are_written() -> None:
    write(home() / ".claude.json", '{"mcpServers": "nope"}')
    with pytest.raises(ConfigError, match='"mcpServers" is not a JSON object'):
        install("claude-code")
    assert not claude_settings().exists()


def test_a_moved_interpreter_is_updated_in_place_without_duplicates() -> None:
    settings = write(claude_settings(), SETTINGS)
    install("claude-code", python=OTHER_PY)
    data = load(settings)
    assert data["hooks"]["Stop"][-1] == ours("Stop", OTHER_PY)
    assert data["hooks"]["Stop"][-1]["hooks"][0]["command"] == \
        "'/opt/other env/bin/python3' -m memdir hook stop"

    report = install("claude-code", python=PY)
    assert report.files[0].changes == tuple(f"updated {s.event} hook" for s in HOOKS)
    assert report.files[1].changes == ("updated MCP server memdir",)
    data = load(settings)
    assert data["hooks"]["Stop"] == [json.loads(SETTINGS)["hooks"]["Stop"][0], ours("Stop")]
    uninstall("claude-code")
    assert settings.read_text() == SETTINGS


def test_an_existing_memdir_server_keeps_its_other_settings() -> None:
    claude_json = write(home() / ".claude.json", json.dumps(
        {"mcpServers": {"memdir": {"command": "memdir", "args": ["mcp"],
                                   "env": {"MEMDIR_HOME": "/data"}}}}))
    report = install("claude-code")
    assert report.files[1].changes == ("updated MCP server memdir",)
    assert load(claude_json)["mcpServers"]["memdir"] == {
        "command": PY, "args": ["-m", "memdir", "mcp"], "env": {"MEMDIR_HOME": "/data"},
        "type": "stdio"}


def test_the_hooks_installed_are_the_events_memdir_hook_handles() -> None:
    from memdir.agents.hooks import EVENTS

    assert tuple(s.action for s in HOOKS) == EVENTS


@pytest.mark.parametrize(("command", "action"), [
    (f"{PY} -m memdir hook stop", "stop"),
    ("'/opt/my env/bin/python' -m memdir hook session-start", "session-start"),
    ('"C:/Program Files/Python/python.exe" -m memdir hook prompt', "prompt"),
    ("/usr/local/bin/memdir hook pre-compact", "pre-compact"),
    ("memdir hook session-end", "session-end"),
    ("MEMDIR_HOME=/data python3 -m memdir hook stop", "stop"),
    ("env MEMDIR_DEBUG=1 python3 -m memdir hook prompt-submit", "prompt-submit"),
    ("echo memdir hook stop", None),
    ("python3 -m memdir hook stop && notify-send done", None),
    ("python3 -m memdir.extra hook stop", None),
    ("/usr/bin/memdir-helper hook stop", None),
    ("memdir context --budget 300", None),
    ("python3 -m memdir hook 'unclosed", None),
])
def test_memdir_entries_are_recognised_by_their_command(command: str,
                                                        action: str | None) -> None:
    assert hook_action({"type": "command", "command": command}) == action
    assert hook_action({"type": "prompt", "command": command}) is None


def test_settings_through_a_symlink_keep_the_link_and_the_permissions() -> None:
    real = write(home() / "dotfiles" / "settings.json", SETTINGS)
    claude_settings().parent.mkdir()
    claude_settings().symlink_to(real)
    claude_json = write(home() / ".claude.json", CLAUDE_JSON)
    os.chmod(claude_json, 0o600)
    install("claude-code")
    assert claude_settings().is_symlink()
    assert "memdir hook stop" in real.read_text()
    assert (claude_json.stat().st_mode & 0o777) == 0o600
    assert (claude_json.with_name(".claude.json" + BACKUP_SUFFIX).stat().st_mode & 0o777) == 0o600
    assert real.with_name("settings.json" + BACKUP_SUFFIX).read_text() == SETTINGS


def test_dry_run_reports_and_writes_nothing() -> None:
    write(claude_settings(), SETTINGS)
    report = install("claude-code", dry_run=True)
    assert [f.status for f in report.files] == ["updated", "created"]
    assert report.files[0].changes[0] == "added SessionStart hook"
    assert claude_settings().read_text() == SETTINGS
    assert sorted(p.name for p in home().rglob("*")) == [".claude", "settings.json"]


def test_project_scope_uses_the_checkout_root(repo: Path) -> None:
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    install("claude-code", "project", project=sub)
    install("codex", "project", project=sub)
    assert "memdir hook prompt" in (repo / ".claude" / "settings.json").read_text()
    assert load(repo / ".mcp.json")["mcpServers"]["memdir"]["command"] == PY
    assert "memdir hook stop" in (repo / ".codex" / "hooks.json").read_text()
    assert "[mcp_servers.memdir]" in (repo / ".codex" / "config.toml").read_text()
    assert not (home() / ".claude").exists() and not (home() / ".codex").exists()
    assert status("codex", "project", project=repo).installed
    uninstall("claude-code", "project", project=repo)
    uninstall("codex", "project", project=repo)
    assert sorted(p.name for p in (repo / ".claude").iterdir()) == []


# -- Codex --------------------------------------------------------------------------------------


MEMDIR_TABLE = f'[mcp_servers.memdir]\ncommand = "{PY}"\nargs = ["-m", "memdir", "mcp"]\n'


def test_codex_hooks_json_and_config_toml_keep_everything_else() -> None:
    config = write(home() / ".codex" / "config.toml", CONFIG_TOML)
    hooks = write(home() / ".codex" / "hooks.json", json.dumps(
        {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "check-bash", "statusMessage": "checking"}]}]}}))
    install("codex")
    install("codex")
    assert config.read_text() == CONFIG_TOML + "\n" + MEMDIR_TABLE
    assert tomllib.loads(config.read_text())["mcp_servers"]["docs"]["args"] == ["-y", "docs-mcp"]
    data = load(hooks)
    assert list(data["hooks"]) == ["PreToolUse", *(s.event for s in HOOKS)]
    assert data["hooks"]["SessionEnd"] == [ours("SessionEnd")]
    assert status("codex").installed

    uninstall("codex")
    assert config.read_text() == CONFIG_TOML
    assert load(hooks) == {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "check-bash", "statusMessage": "checking"}]}]}}


def test_codex_table_is_replaced_in_place_and_removed_with_its_sub_tables() -> None:
    before = CONFIG_TOML.replace("[features]", '[mcp_servers.memdir]\ncommand = "memdir"\n'
                                 'args = ["mcp"]\n\n[mcp_servers.memdir.env]\nA = "1"\n\n'
                                 "# features follow\n[features]")
    config = write(home() / ".codex" / "config.toml", before)
    report = install("codex")
    assert report.files[1].changes == ("updated MCP server memdir",)
    text = config.read_text()
    assert text == before.replace('command = "memdir"\nargs = ["mcp"]\n',
                                  f'command = "{PY}"\nargs = ["-m", "memdir", "mcp"]\n')
    assert tomllib.loads(text)["mcp_servers"]["memdir"]["env"] == {"A": "1"}

    uninstall("codex")
    after = config.read_text()
    assert "memdir" not in after
    assert after == CONFIG_TOML.replace("[features]", "# features follow\n[features]")


def test_codex_server_keeps_the_users_own_keys_when_updated() -> None:
    # A moved interpreter (or an older memdir's command) is updated; the user's inline env and
    # timeout in memdir's table stay, as in Claude Code's JSON.
    before = CONFIG_TOML.replace("[features]", '[mcp_servers.memdir]\ncommand = "memdir"\n'
                                 'args = [\n  "mcp",\n]  # old\n'
                                 'env = { MEMDIR_HOME = "/data/mem" }\n'
                                 "startup_timeout_sec = 30\n\n[features]")
    config = write(home() / ".codex" / "config.toml", before)
    report = install("codex")
    assert report.files[1].changes == ("updated MCP server memdir",)
    server = tomllib.loads(config.read_text())["mcp_servers"]["memdir"]
    assert server == {"command": PY, "args": ["-m", "memdir", "mcp"],
                      "env": {"MEMDIR_HOME": "/data/mem"}, "startup_timeout_sec": 30}
    install("codex")  # again: nothing changes
    assert tomllib.loads(config.read_text())["mcp_servers"]["memdir"] == server


def test_codex_config_without_a_final_newline_comes_back_byte_identical() -> None:
    config = write(home() / ".codex" / "config.toml", 'model = "o3"')
    install("codex")
    assert config.read_text() == 'model = "o3"\n\n' + MEMDIR_TABLE
    uninstall("codex")
    assert config.read_text() == 'model = "o3"'


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
def test_crlf_files_come_back_byte_identical(agent: str) -> None:
    # Windows editors write CRLF: install keeps every byte outside memdir's entries, and
    # uninstall gives the file back as it was.
    if agent == "codex":
        path = home() / ".codex" / "config.toml"
        text = 'model = "o3"\r\n\r\n[features]\r\nx = 1\r\n'
    else:
        path, text = home() / ".claude.json", '{\r\n  "theme": "dark"\r\n}\r\n'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    install(agent)
    if agent == "codex":
        assert path.read_bytes().startswith(text.encode())
    uninstall(agent)
    assert path.read_bytes() == text.encode()


@pytest.mark.parametrize(("text", "problem"), [
    ('model = "o3\n', "is not valid TOML"),
    ('mcp_servers = { docs = { command = "npx" } }\n', "without touching anything else"),
    ('mcp_servers = "x"\n', "mcp_servers is not a table"),
])
def test_codex_config_memdir_cannot_edit_safely_is_refused(text: str, problem: str) -> None:
    config = write(home() / ".codex" / "config.toml", text)
    with pytest.raises(ConfigError, match=problem) as caught:
        install("codex")
    assert str(config) in caught.value.message
    assert config.read_text() == text
    assert not (home() / ".codex" / "hooks.json").exists()


def test_codex_server_written_as_dotted_keys_is_left_for_the_user() -> None:
    text = 'mcp_servers.memdir.command = "memdir"\nmcp_servers.memdir.args = ["mcp"]\n'
    config = write(home() / ".codex" / "config.toml", text)
    with pytest.raises(ConfigError) as caught:
        uninstall("codex")
    assert caught.value.hint == f"remove the memdir server from {config} by hand"
    assert config.read_text() == text


# -- status ---------------------------------------------------------------------------------


def test_status_says_what_is_installed_where() -> None:
    before = status("claude-code")
    assert not before.installed and not before.mcp_registered
    assert [(h.event, h.installed) for h in before.hooks] == [(s.event, False) for s in HOOKS]
    assert before.hooks_file == claude_settings()
    assert before.mcp_file == home() / ".claude.json"

    install("claude-code", python=OTHER_PY)
    moved = status("claude-code")
    assert moved.mcp_registered and not moved.mcp_current and not moved.installed
    assert all(h.installed and not h.current for h in moved.hooks)
    assert moved.hooks[2].command == "'/opt/other env/bin/python3' -m memdir hook stop"

    install("claude-code")
    now = status("claude-code")
    assert now.installed and now.to_dict()["installed"] is True
    assert now.to_dict()["hooks"][0] == {
        "event": "SessionStart", "action": "session-start", "installed": True,
        "current": True, "command": f"{PY} -m memdir hook session-start"}


# -- the CLI --------------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home")
    common.add_argument("--project")
    common.add_argument("--json", action="store_true")
    parser = argparse.ArgumentParser(prog="memdir")
    hooks_cli.add_parser(parser.add_subparsers(dest="command"), common)
    return parser.parse_args(argv)


def test_cli_install_status_uninstall(capsys: pytest.CaptureFixture[str]) -> None:
    write(claude_settings(), SETTINGS)
    assert hooks_cli.run(parse("hooks", "install", "--agent", "claude-code")) == 0
    out = capsys.readouterr().out
    assert f"{claude_settings()}: updated\n    - added SessionStart hook" in out
    assert "backup of the original: " + str(claude_settings()) + BACKUP_SUFFIX in out
    for client in ("Gemini CLI: add to ~/.gemini/settings.json", "Cursor: add to ~/.cursor",
                   "Continue: add to <workspace>/.continue/mcpServers/memdir.yaml"):
        assert client in out

    assert hooks_cli.run(parse("hooks", "status", "--agent", "claude-code", "--json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["installed"] is True and data["mcp_file"] == str(home() / ".claude.json")

    assert hooks_cli.run(parse("hooks", "status")) == 0
    out = capsys.readouterr().out
    assert "claude-code (user scope): installed" in out
    assert "codex (user scope): not fully installed" in out
    assert "    Stop              missing" in out

    assert hooks_cli.run(parse("hooks", "uninstall", "--agent", "claude-code", "--json")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["action"] == "uninstall" and data["changed"] is True
    assert data["files"][1] == {"path": str(home() / ".claude.json"), "status": "removed",
                                "changes": ["removed MCP server memdir"], "backup": None}
    assert claude_settings().read_text() == SETTINGS


def test_cli_json_install_and_snippets(capsys: pytest.CaptureFixture[str]) -> None:
    assert hooks_cli.run(parse("hooks", "install", "--agent", "codex", "--json",
                               "--dry-run")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dry_run"] is True and data["changed"] is True
    assert [f["status"] for f in data["files"]] == ["created", "created"]
    assert not (home() / ".codex").exists()
    snippets = {s["client"]: s["text"] for s in data["snippets"]}
    carried = str(Path(os.environ["MEMDIR_HOME"]).resolve())  # conftest's: not the default
    assert data["home"] == carried
    assert json.loads(snippets["Gemini CLI"]) == {"mcpServers": {"memdir": {
        "command": PY, "args": ["-m", "memdir", "mcp", "--home", carried]}}}
    assert json.loads(snippets["Cursor"])["mcpServers"]["memdir"]["type"] == "stdio"
    assert snippets["Continue"].startswith("name: memdir\nversion: 0.0.1\nschema: v1\n")
    assert f'    command: "{PY}"' in snippets["Continue"]


def test_cli_errors_are_memdir_errors_and_usage_needs_an_agent() -> None:
    write(claude_settings(), "{oops")
    with pytest.raises(ConfigError):
        hooks_cli.run(parse("hooks", "install", "--agent", "claude-code"))
    with pytest.raises(SystemExit):
        parse("hooks", "install")
    with pytest.raises(SystemExit):
        parse("hooks", "install", "--agent", "vim")


def test_cli_project_flag_selects_the_project(repo: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert hooks_cli.run(parse("hooks", "install", "--agent", "claude-code", "--scope",
                               "project", "--project", str(repo))) == 0
    assert str(repo / ".mcp.json") in capsys.readouterr().out
    assert (repo / ".claude" / "settings.json").exists()


def test_real_cli_subprocess(tmp_path: Path, repo: Path) -> None:
    env = {**os.environ, "HOME": str(home())}

    def memdir(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memdir", *args], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=60)

    assert memdir("hooks", "--help").returncode == 0
    write(claude_settings(), SETTINGS)
    result = memdir("hooks", "install", "--agent", "claude-code", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files"][0]["status"] == "updated"
    result = memdir("hooks", "status", "--agent", "claude-code")
    assert "claude-code (user scope): installed" in result.stdout
    write(home() / ".codex" / "config.toml", "[broken")
    result = memdir("hooks", "install", "--agent", "codex")
    assert result.returncode == 2
    assert "is not valid TOML" in result.stderr and "hint: fix the syntax" in result.stderr
    assert memdir("hooks", "uninstall", "--agent", "claude-code").returncode == 0
    assert claude_settings().read_text() == SETTINGS
