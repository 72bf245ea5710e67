"""``memdir hooks install|uninstall|status``: which files each agent reads, edited safely.

Files (``~`` is ``Path.home()``, so ``$HOME``; a project is the root of the checkout holding
the current directory or ``--project``):

- Claude Code: hooks in ``~/.claude/settings.json`` or ``<project>/.claude/settings.json``;
  the MCP server in ``~/.claude.json`` (user scope, where ``claude mcp add --scope user``
  puts it) or ``<project>/.mcp.json``.
- Codex: hooks in ``~/.codex/hooks.json`` or ``<project>/.codex/hooks.json``; the MCP server
  in ``~/.codex/config.toml`` or ``<project>/.codex/config.toml``.
- Gemini CLI, Cursor and Continue: the CLI prints MCP snippets to paste.

Invariants:
- Only memdir's own entries change (:mod:`memdir.hooks_agents` says which): every other key,
  hook and table stays, in its order. JSON is rewritten with 2-space indentation and a final
  newline, and only when its content changes: installing twice leaves the first install's
  bytes. ``config.toml`` is edited as text and every byte outside memdir's table is kept.
- A file that cannot be read as expected (JSON or TOML that does not parse, a top level that
  is not an object, a ``"hooks"`` or ``"mcpServers"`` that is not an object, an event that is
  not a list) is refused with a :class:`ConfigError` naming the file and the problem, and
  nothing is written anywhere: every file's edit is planned before the first write.
- Numbers keep the text they were written with (:mod:`memdir.settings_json`): ``1e400``
  is not written back as ``Infinity``, nor ``1.50`` as ``1.5``.
- A memdir hook the user customised (an ``env`` prefix, ``--home``...) is left as it is,
  and so is a timeout the user set on a plain one; the report's notes say so
  (:func:`memdir.hooks_agents.add_hooks`).
- Backups, atomic writes and re-planning a file that changed meanwhile:
  :mod:`memdir.settings_files`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir.codex_toml import toml_server
from memdir.errors import ConfigError
from memdir.hooks_agents import (
    HOOKS,
    MCP_ARGS,
    MCP_NAME,
    add_hooks,
    add_server,
    hook_current,
    memdir_entries,
    remove_hooks,
    remove_server,
)
from memdir.settings_files import (
    BACKUP_SUFFIX,
    EXISTED_SUFFIX,
    Edit,
    FileChange,
    apply,
    json_edit,
    read_text,
    toml_edit,
)
from memdir.settings_json import loads

__all__ = [
    "AGENTS",
    "BACKUP_SUFFIX",
    "EXISTED_SUFFIX",
    "SCOPES",
    "FileChange",
    "HookState",
    "Report",
    "Status",
    "Target",
    "install",
    "status",
    "target",
    "uninstall",
]

AGENTS = ("claude-code", "codex")
SCOPES = ("user", "project")

def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    return value


@dataclass(frozen=True)
class Target:
    """The files one agent reads, for one scope."""

    agent: str
    scope: str
    hooks_file: Path
    mcp_file: Path


def target(agent: str, scope: str, project: Path) -> Target:
    base = Path.home() if scope == "user" else project
    if agent == "claude-code":
        mcp = Path.home() / ".claude.json" if scope == "user" else project / ".mcp.json"
        return Target(agent, scope, base / ".claude" / "settings.json", mcp)
    return Target(agent, scope, base / ".codex" / "hooks.json", base / ".codex" / "config.toml")


@dataclass(frozen=True)
class Report:
    action: str  # install | uninstall
    agent: str
    scope: str
    dry_run: bool
    files: tuple[FileChange, ...]
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return any(f.status not in ("unchanged", "absent") for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {**_plain(self), "changed": self.changed}


@dataclass(frozen=True)
class HookState:
    event: str
    action: str
    installed: bool
    current: bool  # exactly what `install` would write now
    command: str | None


@dataclass(frozen=True)
class Status:
    agent: str
    scope: str
    hooks_file: Path
    hooks: tuple[HookState, ...]
    mcp_file: Path
    mcp_registered: bool
    mcp_current: bool

    @property
    def installed(self) -> bool:
        return self.mcp_current and all(h.current for h in self.hooks)

    def to_dict(self) -> dict[str, Any]:
        return {**_plain(self), "installed": self.installed}


# -- the commands -----------------------------------------------------------------------------


def _target(agent: str, scope: str, project: Path | None) -> Target:
    from memdir.paths import find_git_roots

    if agent not in AGENTS:
        raise ConfigError(f"unknown agent {agent!r}", f"use one of: {', '.join(AGENTS)}")
    if scope not in SCOPES:
        raise ConfigError(f"unknown scope {scope!r}", f"use one of: {', '.join(SCOPES)}")
    start = project if project is not None else Path.cwd()
    if scope == "project" and not start.is_dir():
        raise ConfigError(f"project directory {start} does not exist",
                          "run the command inside the project or pass --project PATH")
    return target(agent, scope, find_git_roots(start).worktree if scope == "project" else start)


def _edits(t: Target, python: str | None, customised: list[str],
           timeouts: list[str] | None = None) -> list[tuple[Path, Edit]]:
    """The edits that install (``python`` given) or uninstall memdir for one target; the
    customised memdir hooks they leave (install) or remove (uninstall) go to
    ``customised``, the user's timeouts install keeps to ``timeouts``."""
    hooks, mcp = t.hooks_file, t.mcp_file
    if python:
        hooks_edit = json_edit(hooks, lambda d, _b: add_hooks(d, python, hooks, customised,
                                                              timeouts))
        mcp_edit = json_edit(mcp, lambda d, _b: add_server(d, python, mcp))
    else:
        hooks_edit = json_edit(hooks, lambda d, b: remove_hooks(d, b, hooks, customised))
        mcp_edit = json_edit(mcp, lambda d, b: remove_server(d, b, mcp))
    if mcp.suffix == ".toml":
        mcp_edit = toml_edit(mcp, python)
    return [(hooks, hooks_edit), (mcp, mcp_edit)]


def _notes(t: Target, python: str, customised: list[str],
           timeouts: list[str]) -> tuple[str, ...]:
    notes = [f"the hooks and the MCP server run {python}; run `memdir hooks install` again "
             "after moving or recreating that environment"]
    notes += [f"left your customised memdir hook as it is (memdir adds none beside it) in "
              f"{t.hooks_file}: {hook}" for hook in dict.fromkeys(customised)]
    notes += [f"kept your timeout of the memdir hook in {t.hooks_file}: {timeout}"
              for timeout in dict.fromkeys(timeouts)]
    if t.agent == "claude-code":
        notes.append("restart running Claude Code sessions; /hooks and /mcp show what is active;"
                     " leave memdir's Claude Code plugin off, or every hook runs twice")
        if t.scope == "project":
            notes.append("Claude Code asks before using the servers of .mcp.json; the "
                         "interpreter path is this machine's, so in a shared repository "
                         "prefer --scope user")
    else:
        notes.append("Codex asks you to review and trust new hooks before they run; "
                     "SessionEnd needs Codex CLI 0.145 or newer")
        if t.scope == "project":
            notes.append("Codex reads <project>/.codex only in projects you trust")
    return tuple(notes)


def install(agent: str, scope: str = "user", *, project: Path | None = None,
            python: str | None = None, dry_run: bool = False) -> Report:
    """Add memdir's hooks and MCP server to ``agent``'s settings (idempotent)."""
    python = python or sys.executable
    t = _target(agent, scope, project)
    customised: list[str] = []
    timeouts: list[str] = []
    files = apply(_edits(t, python, customised, timeouts), dry_run)
    return Report("install", agent, scope, dry_run, files,
                  _notes(t, python, customised, timeouts))


def uninstall(agent: str, scope: str = "user", *, project: Path | None = None,
              dry_run: bool = False) -> Report:
    """Remove exactly memdir's hooks (customised ones too) and MCP server from ``agent``'s
    settings."""
    t = _target(agent, scope, project)
    customised: list[str] = []
    files = apply(_edits(t, None, customised), dry_run)
    notes = tuple(f"{'would remove' if dry_run else 'removed'} a memdir hook you had "
                  f"customised from {t.hooks_file}: {hook}" for hook in dict.fromkeys(customised))
    return Report("uninstall", agent, scope, dry_run, files, notes)


def status(agent: str, scope: str = "user", *, project: Path | None = None,
           python: str | None = None) -> Status:
    """What memdir has installed for ``agent`` (reads only)."""
    python = python or sys.executable
    t = _target(agent, scope, project)
    hooks = loads(t.hooks_file, read_text(t.hooks_file)).get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f'{t.hooks_file}: "hooks" is not a JSON object',
                          f'fix "hooks" in {t.hooks_file}: it maps event names to lists')
    states = []
    for spec in HOOKS:
        groups = hooks.get(spec.event)
        groups = groups if isinstance(groups, list) else []
        found = memdir_entries(groups)
        command = found[0].get("command") if found else None
        states.append(HookState(spec.event, spec.action, bool(found),
                                bool(found) and hook_current(groups, spec, python), command))
    text = read_text(t.mcp_file)
    if t.mcp_file.suffix == ".toml":
        server = toml_server(t.mcp_file, text or "")
    else:
        servers = loads(t.mcp_file, text).get("mcpServers")
        server = servers.get(MCP_NAME) if isinstance(servers, dict) else None
    current = (isinstance(server, dict) and server.get("command") == python
               and server.get("args") == list(MCP_ARGS))
    return Status(agent, scope, t.hooks_file, tuple(states), t.mcp_file, server is not None,
                  current)
