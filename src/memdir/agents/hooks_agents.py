"""What memdir writes into a coding agent's settings, and how it merges in (no file I/O).

The formats (checked against the agents' documentation): Claude Code's and Codex's hooks are
``{"hooks": {event: [{"matcher"?: regex, "hooks": [{"type": "command", "command": str,
"timeout": seconds}]}]}}`` (no matcher: every occurrence of the event). The MCP server is
``mcpServers.memdir = {"type": "stdio", "command", "args"}`` in Claude Code's JSON files and
the ``[mcp_servers.memdir]`` table (``command``, ``args``) of Codex's ``config.toml``.

Invariants:
- The functions here are pure: parsed JSON objects in, the same out (Codex's TOML text:
  :mod:`memdir.agents.codex_toml`); reading, backups and writing are
  :mod:`memdir.agents.hooks_install`'s.
- Every hook runs the interpreter memdir is installed in, by absolute path:
  ``<python> -m memdir hook <action>``, so a hook works whatever the agent's PATH is. A home
  the hooks would not find by themselves (install's ``home``) follows as ``--home HOME``,
  quoted for the shell; the MCP server's ``args`` end with it too (:func:`mcp_args`).
- An entry is memdir's when its command, split the way a shell splits it, is
  ``<program> -m memdir hook <action>`` or ``<dir>/memdir hook <action>``, possibly
  customised: after ``env`` (and its options) and ``NAME=value`` words, with interpreter
  options before ``-m``, with ``hook`` options (``--home DIR``, ``--format json``) around
  the action. Nothing else is ever touched, so a moved virtualenv or a renamed action is
  still recognised, and a user's own hooks never are (a compound command is the user's).
- ``install`` rewrites only memdir's entries as memdir writes them (the plain form above);
  a customised one is the user's choice and stays as it is, and an event that has one gets
  no second memdir entry. ``uninstall`` removes both kinds.
- A plain entry's ``timeout`` that is a positive number other than memdir's default is the
  user's: a rewrite keeps it (memdir's defaults have never changed; were one to, its old
  value would have to count as memdir's here).
- memdir adds its hooks as matcher groups of their own at the end of each event's list (Codex
  keys its trust of a hook by position, so existing hooks keep theirs); it owns the MCP
  server named ``memdir`` and, in TOML, the ``[mcp_servers.memdir]`` table and its sub-tables.
"""

from __future__ import annotations

import copy
import math
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir.agents.http_hooks import HttpTarget, url_action
from memdir.agents.settings_json import Number
from memdir.core.errors import ConfigError

__all__ = ["HOOKS", "MCP_ARGS", "MCP_NAME", "HookSpec", "add_hooks", "add_server", "bad_shape",
           "hook_action", "hook_command", "hook_current", "hook_entry", "hook_group",
           "mcp_args", "mcp_server", "memdir_entries", "remove_hooks", "remove_server"]

MCP_NAME = "memdir"
MCP_ARGS = ("-m", "memdir", "mcp")


@dataclass(frozen=True)
class HookSpec:
    event: str  # the agent's event name
    action: str  # the `memdir hook` sub-command
    timeout: int  # seconds: the agent cancels the hook after this
    matcher: str | None = None  # None: every occurrence of the event
    earlier: tuple[int, ...] = ()  # timeouts memdir wrote before: memdir's, not the user's


HOOKS = (
    HookSpec("SessionStart", "session-start", 10, "startup|resume|clear|compact"),
    HookSpec("UserPromptSubmit", "prompt", 10),
    HookSpec("Stop", "stop", 30),
    HookSpec("PreCompact", "pre-compact", 30),
    # Codex clamps SessionEnd to 3 s, Claude Code gives all of them 1.5 s: the hook only
    # hands the session to a background process (memdir.agents.hooks).
    HookSpec("SessionEnd", "session-end", 1, earlier=(5,)),
)


_BARE = re.compile(r"[\w@%+=:,./\\-]+")


def _quote(word: str) -> str:
    if _BARE.fullmatch(word) and (os.name == "nt" or "\\" not in word):
        return word
    return f'"{word}"' if os.name == "nt" else shlex.quote(word)


def hook_command(action: str, python: str, home: str | None = None) -> str:
    """The shell command of memdir's hook for ``action``; ``home``: the memdir home it names
    (quoted for the shell), when the hook must not find it by itself."""
    command = f"{_quote(python)} -m memdir hook {action}"
    return command if home is None else f"{command} --home {_quote(home)}"


def hook_entry(spec: HookSpec, python: str, home: str | None = None,
               http: HttpTarget | None = None) -> dict[str, object]:
    """memdir's entry for an event: a command, or an HTTP POST (:mod:`.http_hooks`)."""
    from memdir.agents.http_hooks import ACTIONS

    if http is not None and spec.action in ACTIONS:
        return {"type": "http", "url": http.url(spec.action), "headers": http.headers(),
                "timeout": spec.timeout}
    return {"type": "command", "command": hook_command(spec.action, python, home),
            "timeout": spec.timeout}


def hook_group(spec: HookSpec, python: str, home: str | None = None,
               http: HttpTarget | None = None) -> dict[str, object]:
    group: dict[str, object] = {} if spec.matcher is None else {"matcher": spec.matcher}
    group["hooks"] = [hook_entry(spec, python, home, http)]
    return group


def mcp_args(home: str | None = None) -> list[str]:
    """The MCP server's ``args``: ``-m memdir mcp``, with ``--home HOME`` when given."""
    return [*MCP_ARGS, *(() if home is None else ("--home", home))]


_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=.*", re.DOTALL)
_VALUED = {"env": ("-u", "--unset", "-C", "--chdir", "-S", "--split-string"),
           "python": ("-X", "-W", "-c"), "hook": ("--home", "--format"),
           "cli": ("--home", "--project")}


def _skip_options(words: list[str], valued: tuple[str, ...]) -> list[str] | None:
    """``words`` after the leading options (and the values of those in ``valued``); None when
    an option's value is missing."""
    while words and words[0].startswith("-") and words[0] != "-m":
        if words[0] not in valued:
            words = words[1:]
        elif len(words) < 2:
            return None
        else:
            words = words[2:]
    return words


def _parse_command(command: str) -> tuple[str, bool, str | None] | None:
    """(action, customised, home) for a memdir hook command; None for anything else. ``home``
    is the value of a ``--home`` after the action of a command otherwise plain: the form
    install writes to carry a home (whether it counts as customised: :func:`_customised`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    plain = True
    if words[:1] == ["env"]:
        plain = False
        rest = _skip_options(words[1:], _VALUED["env"])
        if rest is None:
            return None
        words = rest
    while words and _ASSIGNMENT.fullmatch(words[0]):
        plain, words = False, words[1:]
    if not words:
        return None
    program = re.split(r"[/\\]", words[0])[-1]
    if program in ("memdir", "memdir.exe"):
        after = words[1:]
    else:
        after = _skip_options(words[1:], _VALUED["python"]) or []
        plain = plain and len(after) == len(words) - 1
        if after[:2] != ["-m", "memdir"]:
            return None
        after = after[2:]
    # `memdir --home X hook EVENT`: the CLI's own options may come before `hook` too
    rest = _skip_options(after, _VALUED["cli"])
    if rest is None:
        return None
    plain, after = plain and len(rest) == len(after), rest
    if after[:1] != ["hook"]:
        return None
    if plain and len(after) == 4 and after[2] == "--home" and not after[1].startswith("-"):
        return after[1], False, after[3]
    positional: list[str] = []
    args = after[1:]
    while args:
        rest = _skip_options(args, _VALUED["hook"])
        if rest is None:
            return None
        plain = plain and len(rest) == len(args)
        if rest:
            positional.append(rest[0])
            rest = rest[1:]
        args = rest
    if len(positional) != 1:
        return None
    return positional[0], not plain, None


def _parsed(entry: object) -> tuple[str, bool, str | None] | None:
    if not isinstance(entry, dict) or entry.get("type", "command") != "command":
        return None
    command = entry.get("command")
    return _parse_command(command) if isinstance(command, str) else None


def hook_action(entry: object) -> str | None:
    """The memdir action a hook entry runs (a command, or an HTTP hook to memdir's daemon),
    or None when the entry is not memdir's."""
    if isinstance(entry, dict) and entry.get("type") == "http":
        return url_action(entry.get("url"))
    parsed = _parsed(entry)
    return parsed[0] if parsed else None


def _customised(entry: object, home: str | None = None, installing: bool = True) -> bool:
    """A memdir entry the user changed beyond what install writes: install leaves it. An
    entry naming a home in install's own form is install's to rewrite when install is given
    a home (the user asked for that one now); without one, it is the user's choice, kept."""
    parsed = _parsed(entry)
    if parsed is None:
        return False
    return parsed[1] or (installing and parsed[2] is not None and home is None)


def mcp_server(python: str, home: str | None = None) -> dict[str, object]:
    """The ``mcpServers.memdir`` value of the JSON formats (Claude Code, Gemini, Cursor)."""
    return {"type": "stdio", "command": python, "args": mcp_args(home)}


# -- merging into the JSON formats ------------------------------------------------------------


def bad_shape(path: Path, what: str, fix: str) -> ConfigError:
    """A settings file memdir can read but not safely edit: nothing is written."""
    return ConfigError(f"{path}: {what}", f"{fix} in {path} (or move the file away) and run the "
                       "command again; memdir changed nothing")


def _existed(before: dict[str, Any] | None, *keys: str) -> bool:
    node: Any = before
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _hooks_object(data: dict[str, Any], path: Path, create: bool) -> dict[str, Any] | None:
    hooks = data.setdefault("hooks", {}) if create else data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise bad_shape(path, '"hooks" is not a JSON object',
                         'make "hooks" an object mapping event names to lists')
    return hooks


def _positions(groups: list[Any]) -> list[tuple[int, int]]:
    return [(gi, hi) for gi, group in enumerate(groups)
            if isinstance(group, dict) and isinstance(group.get("hooks"), list)
            for hi, entry in enumerate(group["hooks"]) if hook_action(entry) is not None]


def memdir_entries(groups: list[Any]) -> list[dict[str, Any]]:
    """memdir's hook entries in one event's list of matcher groups, in order."""
    return [groups[gi]["hooks"][hi] for gi, hi in _positions(groups)]


def _users_timeout(entry: dict[str, Any], spec: HookSpec) -> Any:
    """The entry's ``timeout`` when the user set it: a positive, finite number other than
    memdir's default for the event; else None (no timeout, memdir's, or not a number)."""
    value = entry.get("timeout")
    if value is None or isinstance(value, bool) or value == spec.timeout \
            or value in spec.earlier:
        return None
    try:
        seconds = float(value.text if isinstance(value, Number) else value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(seconds) and seconds > 0 else None


def _add_hook(groups: list[Any], spec: HookSpec, python: str, kept: list[str],
              timeouts: list[str], home: str | None = None,
              http: HttpTarget | None = None) -> str | None:
    """Put memdir's hook for one event in its list of matcher groups; what changed, if
    anything. Customised memdir entries stay as they are (listed in ``kept``); the user's
    timeout of a plain one is kept (listed in ``timeouts``)."""
    found = _positions(groups)
    custom = [(gi, hi) for gi, hi in found if _customised(groups[gi]["hooks"][hi], home)]
    plain = [p for p in found if p not in custom]
    kept.extend(f"{spec.event}: {groups[gi]['hooks'][hi]['command']}" for gi, hi in custom)
    if not plain:
        if custom:
            return None
        groups.append(hook_group(spec, python, home, http))
        return f"added {spec.event} hook"
    was = copy.deepcopy(groups)
    for gi, hi in reversed(plain[1:]):
        del groups[gi]["hooks"][hi]
        if not groups[gi]["hooks"]:
            del groups[gi]
    gi, hi = plain[0]
    entry = hook_entry(spec, python, home, http)
    timeout = _users_timeout(groups[gi]["hooks"][hi], spec)
    if timeout is not None:
        entry["timeout"] = timeout
        text = timeout.text if isinstance(timeout, Number) else timeout
        timeouts.append(f"{spec.event}: {text} s (memdir's default: {spec.timeout} s)")
    if len(groups[gi]["hooks"]) == 1:
        groups[gi] = hook_group(spec, python, home, http)
    groups[gi]["hooks"][hi] = entry
    return f"updated {spec.event} hook" if groups != was else None


def hook_current(groups: list[Any], spec: HookSpec, python: str,
                 home: str | None = None, http: HttpTarget | None = None) -> bool:
    """True if install would leave this event's list as it is."""
    return _add_hook(copy.deepcopy(groups), spec, python, [], [], home, http) is None


def add_hooks(data: dict[str, Any], python: str, path: Path, kept: list[str] | None = None,
              timeouts: list[str] | None = None, home: str | None = None,
              http: HttpTarget | None = None) -> list[str]:
    """Put memdir's hook for each event in ``data`` (a settings object), changed in place.

    An event without a memdir entry gets a matcher group of its own at the end of its list; a
    memdir entry as install writes it that differs (another interpreter, a timeout that is
    not the user's) is rewritten where it is, keeping the user's timeout (each listed in
    ``timeouts``: "Event: N s (...)"), and any further such entries of that event are
    removed. A customised memdir entry is left as it is, and its event gets no other: each is
    listed in ``kept`` ("Event: command")."""
    hooks = _hooks_object(data, path, create=True)
    assert hooks is not None
    changes = []
    for spec in HOOKS:
        groups = hooks.setdefault(spec.event, [])
        if not isinstance(groups, list):
            raise bad_shape(path, f'"hooks.{spec.event}" is not a list',
                             f'make "hooks.{spec.event}" a list of matcher groups')
        change = _add_hook(groups, spec, python, [] if kept is None else kept,
                           [] if timeouts is None else timeouts, home, http)
        if change:
            changes.append(change)
    return changes


def remove_hooks(data: dict[str, Any], before: dict[str, Any] | None, path: Path,
                 customised: list[str] | None = None) -> list[str]:
    """Remove every memdir hook entry, customised ones too (each listed in ``customised``);
    then the matcher groups that held only memdir entries, and event lists or ``"hooks"``
    left empty, unless ``before`` (the file before memdir) had them."""
    hooks = _hooks_object(data, path, create=False)
    if not hooks:
        return []
    changes = []
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list) or not _positions(groups):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                entries = [e for e in group["hooks"] if hook_action(e) is None]
                if customised is not None:
                    customised.extend(f"{event}: {e['command']}" for e in group["hooks"]
                                      if _customised(e, installing=False))
                if group["hooks"] and not entries:
                    continue
                group["hooks"] = entries
            kept.append(group)
        changes.append(f"removed {event} hook")
        if kept or _existed(before, "hooks", event):
            hooks[event] = kept
        else:
            del hooks[event]
    if changes and not hooks and not _existed(before, "hooks"):
        del data["hooks"]
    return changes


def _servers(data: dict[str, Any], path: Path, create: bool) -> dict[str, Any] | None:
    servers = data.setdefault("mcpServers", {}) if create else data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise bad_shape(path, '"mcpServers" is not a JSON object',
                         'make "mcpServers" an object mapping server names to settings')
    return servers


def add_server(data: dict[str, Any], python: str, path: Path,
               home: str | None = None) -> list[str]:
    """Register memdir's MCP server; keys of an existing entry other than type, command and
    args (an ``env``, say) are kept."""
    servers = _servers(data, path, create=True)
    assert servers is not None
    old = servers.get(MCP_NAME)
    server = mcp_server(python, home)
    new = {**old, **server} if isinstance(old, dict) else server
    if new == old:
        return []
    servers[MCP_NAME] = new
    return [f"{'registered' if old is None else 'updated'} MCP server {MCP_NAME}"]


def remove_server(data: dict[str, Any], before: dict[str, Any] | None, path: Path) -> list[str]:
    servers = _servers(data, path, create=False)
    if not servers or MCP_NAME not in servers:
        return []
    del servers[MCP_NAME]
    if not servers and not _existed(before, "mcpServers"):
        del data["mcpServers"]
    return [f"removed MCP server {MCP_NAME}"]
