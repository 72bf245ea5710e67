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
- Only memdir's own entries change (:mod:`memdir.agents.hooks_agents` says which): every other key,
  hook and table stays, in its order. JSON is rewritten with 2-space indentation and a final
  newline, and only when its content changes: installing twice leaves the first install's
  bytes. ``config.toml`` is edited as text and every byte outside memdir's table is kept.
- A file that cannot be read as expected (JSON or TOML that does not parse, a top level that
  is not an object, a ``"hooks"`` or ``"mcpServers"`` that is not an object, an event that is
  not a list) is refused with a :class:`ConfigError` naming the file and the problem, and
  nothing is written anywhere: every file's edit is planned before the first write.
- Numbers keep the text they were written with (:mod:`memdir.agents.settings_json`): ``1e400``
  is not written back as ``Infinity``, nor ``1.50`` as ``1.5``.
- A memdir hook the user customised (an ``env`` prefix, ``--home``...) is left as it is,
  and so is a timeout the user set on a plain one; the report's notes say so
  (:func:`memdir.agents.hooks_agents.add_hooks`). One exception: a hook in install's own form with
  a ``--home`` after the action is rewritten when install is given a home (the newer one).
- A home given to install (``--home``, ``$MEMDIR_HOME``: :func:`carried_home`) that the
  hooks would not find by themselves is written into every hook command and the MCP
  server's args (``--home HOME``), so the agent reads that home whatever its environment.
- The MCP server is registered only where it can start: without the ``mcp`` extra in the
  interpreter the entries run, install leaves the MCP file as it is and its notes say how
  to add the server later; status then does not count the server as missing.
- Backups, atomic writes and re-planning a file that changed meanwhile:
  :mod:`memdir.agents.settings_files`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir.agents.codex_toml import toml_server
from memdir.agents.hooks_agents import (
    HOOKS,
    MCP_NAME,
    add_hooks,
    add_server,
    hook_current,
    mcp_args,
    memdir_entries,
    remove_hooks,
    remove_server,
)
from memdir.agents.http_hooks import HttpTarget
from memdir.agents.settings_files import (
    BACKUP_SUFFIX,
    EXISTED_SUFFIX,
    Edit,
    FileChange,
    apply,
    json_edit,
    read_text,
    toml_edit,
)
from memdir.agents.settings_json import loads
from memdir.core import extras
from memdir.core.errors import ConfigError

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
    "carried_home",
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
    home: Path | None = None  # the home the installed commands name (None: their own)
    mcp_available: bool = True  # False: the mcp extra is missing, the server not registered

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
    mcp_available: bool = True  # False: the mcp extra is missing; the server cannot run

    @property
    def installed(self) -> bool:
        return (self.mcp_current or not self.mcp_available) and all(h.current for h in self.hooks)

    def to_dict(self) -> dict[str, Any]:
        return {**_plain(self), "installed": self.installed}


# -- the commands -----------------------------------------------------------------------------


def _target(agent: str, scope: str, project: Path | None) -> Target:
    from memdir.core.paths import find_git_roots

    if agent not in AGENTS:
        raise ConfigError(f"unknown agent {agent!r}", f"use one of: {', '.join(AGENTS)}")
    if scope not in SCOPES:
        raise ConfigError(f"unknown scope {scope!r}", f"use one of: {', '.join(SCOPES)}")
    start = project if project is not None else Path.cwd()
    if scope == "project" and not start.is_dir():
        raise ConfigError(f"project directory {start} does not exist",
                          "run the command inside the project or pass --project PATH")
    return target(agent, scope, find_git_roots(start).worktree if scope == "project" else start)


def carried_home(given: str | os.PathLike[str] | None) -> Path | None:
    """The home the installed commands must name: ``given`` (``--home``) or
    ``$MEMDIR_HOME``, made absolute; None when neither is set or it is the home a hook finds
    without them (the config file's ``home``, else the default)."""
    from memdir.core.config import read_toml, user_config_path
    from memdir.core.paths import default_home

    explicit = given if given is not None else os.environ.get("MEMDIR_HOME") or None
    if explicit is None:
        return None
    home = Path(explicit).expanduser().resolve()
    value = read_toml(user_config_path()).get("home")
    found = (Path(value).expanduser().resolve() if isinstance(value, str) and value
             else default_home())
    return None if home == found else home


def _edits(t: Target, python: str | None, customised: list[str],
           timeouts: list[str] | None = None, home: str | None = None,
           mcp_ok: bool = True, http: HttpTarget | None = None) -> list[tuple[Path, Edit]]:
    """The edits that install (``python`` given) or uninstall memdir for one target; the
    customised memdir hooks they leave (install) or remove (uninstall) go to
    ``customised``, the user's timeouts install keeps to ``timeouts``. ``mcp_ok`` False:
    install leaves the MCP file alone."""
    hooks, mcp = t.hooks_file, t.mcp_file
    if python:
        hooks_edit = json_edit(hooks, lambda d, _b: add_hooks(d, python, hooks, customised,
                                                              timeouts, home, http))
        mcp_edit = json_edit(mcp, lambda d, _b: add_server(d, python, mcp, home))
    else:
        hooks_edit = json_edit(hooks, lambda d, b: remove_hooks(d, b, hooks, customised))
        mcp_edit = json_edit(mcp, lambda d, b: remove_server(d, b, mcp))
    if mcp.suffix == ".toml":
        mcp_edit = toml_edit(mcp, python, mcp_args(home))
    return [(hooks, hooks_edit)] + ([(mcp, mcp_edit)] if mcp_ok else [])


def _server(t: Target) -> dict[str, Any] | None:
    """The memdir MCP server entry of ``t``'s MCP file, or None."""
    text = read_text(t.mcp_file)
    if t.mcp_file.suffix == ".toml":
        return toml_server(t.mcp_file, text or "")
    servers = loads(t.mcp_file, text).get("mcpServers")
    server = servers.get(MCP_NAME) if isinstance(servers, dict) else None
    return server if isinstance(server, dict) else None


def _mcp_notes(t: Target, python: str) -> list[str]:
    """What install says when the mcp extra is missing: no server registered, and how."""
    notes = [f"the MCP server was not registered: the mcp extra is not installed in {python}; "
             f"install it ({extras.pip_command('mcp', python)}) and run `memdir hooks "
             f"install --agent {t.agent}` again to register it"]
    if _server(t) is not None:
        notes.append(f"the memdir MCP server already in {t.mcp_file} cannot start until "
                     f"then; `memdir hooks uninstall --agent {t.agent}` removes it (and the "
                     "hooks)")
    return notes


def _notes(t: Target, python: str, customised: list[str],
           timeouts: list[str], home: str | None, mcp_ok: bool) -> tuple[str, ...]:
    runs = "the hooks and the MCP server run" if mcp_ok else "the hooks run"
    notes = [f"{runs} {python}; run `memdir hooks install` again after moving or recreating "
             "that environment"]
    if home is not None:
        notes.append(f"the installed commands read the memdir home {home} (given by --home "
                     "or MEMDIR_HOME); install again with another to change it")
    if not mcp_ok:
        notes += _mcp_notes(t, python)
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
        notes.append("SessionEnd needs Codex CLI 0.145 or newer")
    return tuple(notes)


def _http(t: Target, home: str | None) -> HttpTarget:
    """The port and token of Claude Code's HTTP hooks (:mod:`memdir.agents.http_hooks`), for
    the user's own settings only."""
    if t.agent != "claude-code":
        raise ConfigError("Codex runs command hooks only, not HTTP hooks",
                          "leave out --http for codex: its hooks ask the warm daemon anyway")
    if t.scope != "user":
        raise ConfigError("HTTP hooks carry a secret token, and a project's settings file may "
                          "be committed", "install them with --scope user "
                          "(~/.claude/settings.json, kept readable by you alone)")
    from memdir.agents.http_hooks import create
    from memdir.core.config import resolve_home

    return create(resolve_home(home))


def _forget_http(home: str | None) -> None:
    from memdir.agents.http_hooks import forget
    from memdir.core.config import resolve_home

    forget(resolve_home(home))


def install(agent: str, scope: str = "user", *, project: Path | None = None,
            python: str | None = None, dry_run: bool = False,
            home: str | os.PathLike[str] | None = None, mcp: bool | None = None,
            trust: bool = True, http: bool = False) -> Report:
    """Add memdir's hooks and MCP server to ``agent``'s settings (idempotent). ``home``: the
    memdir home the installed commands name (None: the one they find by themselves; see
    :func:`carried_home`). ``mcp``: whether the mcp extra is there (None: ask ``python``);
    without it, no MCP server is registered. ``trust`` (Codex): ask Codex to trust the hooks
    (:mod:`memdir.agents.codex_trust`); False: the notes say how the user does it. ``http``
    (Claude Code, user scope): UserPromptSubmit, Stop, PreCompact and SessionEnd as HTTP hooks
    to the warm daemon (:mod:`memdir.agents.http_hooks`); else all are command hooks."""
    python = python or sys.executable
    where = None if home is None else str(Path(home).expanduser().resolve())
    mcp_ok = extras.installed("mcp", python) if mcp is None else mcp
    t = _target(agent, scope, project)
    web = _http(t, where) if http else None
    if web is None and not dry_run and (agent, scope) == ("claude-code", "user"):
        _forget_http(where)  # command hooks now: no port to keep
    customised: list[str] = []
    timeouts: list[str] = []
    files = apply(_edits(t, python, customised, timeouts, where, mcp_ok, web), dry_run)
    notes = _notes(t, python, customised, timeouts, where, mcp_ok)
    if web is not None:
        notes += (f"UserPromptSubmit, Stop, PreCompact and SessionEnd are HTTP hooks to the warm "
                  f"daemon on 127.0.0.1:{web.port}, with a token that {t.hooks_file} (now "
                  "readable by you alone) and the home's daemon/http.json hold; SessionStart "
                  "stays a command and starts the daemon",)
        if not dry_run:
            with contextlib.suppress(OSError):
                os.chmod(t.hooks_file, 0o600)
            from memdir.agents.http_hooks import restart_daemon

            notes += (restart_daemon(where),)
    if agent == "codex" and not dry_run:
        from memdir.agents.codex_trust import install_notes

        root = t.hooks_file.parent.parent
        notes += tuple(install_notes(root if scope == "project" else Path.cwd(),
                                     t.hooks_file, ask=trust,
                                     project=root if scope == "project" else None))
    return Report("install", agent, scope, dry_run, files, notes,
                  None if where is None else Path(where), mcp_ok)


def uninstall(agent: str, scope: str = "user", *, project: Path | None = None,
              dry_run: bool = False) -> Report:
    """Remove exactly memdir's hooks (customised ones too) and MCP server from ``agent``'s
    settings."""
    t = _target(agent, scope, project)
    customised: list[str] = []
    files = apply(_edits(t, None, customised), dry_run)
    if not dry_run and (agent, scope) == ("claude-code", "user"):
        _forget_http(None)
    notes = tuple(f"{'would remove' if dry_run else 'removed'} a memdir hook you had "
                  f"customised from {t.hooks_file}: {hook}" for hook in dict.fromkeys(customised))
    return Report("uninstall", agent, scope, dry_run, files, notes)


def _http_installed(hooks: dict[str, Any], home: str | None) -> HttpTarget | None:
    """The HTTP hooks' target when memdir's entries include HTTP ones (install --http):
    what counts as current then; None for command hooks."""
    entries = [e for groups in hooks.values() if isinstance(groups, list)
               for e in memdir_entries(groups)]
    if not any(e.get("type") == "http" for e in entries):
        return None
    from memdir.agents.http_hooks import load
    from memdir.core.config import resolve_home

    return load(resolve_home(home)) or HttpTarget(0, "")  # none on record: out of date


def status(agent: str, scope: str = "user", *, project: Path | None = None,
           python: str | None = None, home: str | os.PathLike[str] | None = None,
           mcp: bool | None = None) -> Status:
    """What memdir has installed for ``agent`` (reads only); ``home`` and ``mcp`` as for
    :func:`install`: what install would write is what counts as current."""
    python = python or sys.executable
    where = None if home is None else str(Path(home).expanduser().resolve())
    t = _target(agent, scope, project)
    hooks = loads(t.hooks_file, read_text(t.hooks_file)).get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f'{t.hooks_file}: "hooks" is not a JSON object',
                          f'fix "hooks" in {t.hooks_file}: it maps event names to lists')
    states = []
    web = _http_installed(hooks, where)
    for spec in HOOKS:
        groups = hooks.get(spec.event)
        groups = groups if isinstance(groups, list) else []
        found = memdir_entries(groups)
        command = (found[0].get("command") or found[0].get("url")) if found else None
        states.append(HookState(spec.event, spec.action, bool(found),
                                bool(found) and hook_current(groups, spec, python, where, web),
                                command))
    server = _server(t)
    current = (server is not None and server.get("command") == python
               and server.get("args") == mcp_args(where))
    mcp_ok = extras.installed("mcp", python) if mcp is None else mcp
    return Status(agent, scope, t.hooks_file, tuple(states), t.mcp_file, server is not None,
                  current, mcp_ok)
