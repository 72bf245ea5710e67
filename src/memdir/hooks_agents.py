"""What memdir writes into a coding agent's settings, and how it merges in (no file I/O).

The formats (checked against the agents' documentation): Claude Code's and Codex's hooks are
``{"hooks": {event: [{"matcher"?: regex, "hooks": [{"type": "command", "command": str,
"timeout": seconds}]}]}}`` (no matcher: every occurrence of the event). The MCP server is
``mcpServers.memdir = {"type": "stdio", "command", "args"}`` in Claude Code's JSON files and
the ``[mcp_servers.memdir]`` table (``command``, ``args``) of Codex's ``config.toml``.

Invariants:
- The functions here are pure: parsed JSON objects or TOML text in, the same out; reading,
  backups and writing are :mod:`memdir.hooks_install`'s.
- Every hook runs the interpreter memdir is installed in, by absolute path:
  ``<python> -m memdir hook <action>``, so a hook works whatever the agent's PATH is.
- An entry is memdir's when its command, split the way a shell splits it (after optional
  ``env`` and ``NAME=value`` words), is ``<program> -m memdir hook <action>`` or
  ``<dir>/memdir hook <action>``. Nothing else is ever touched, so a moved virtualenv or a
  renamed action is still recognised, and a user's own hooks never are.
- memdir adds its hooks as matcher groups of their own at the end of each event's list (Codex
  keys its trust of a hook by position, so existing hooks keep theirs); it owns the MCP
  server named ``memdir`` and, in TOML, the ``[mcp_servers.memdir]`` table and its sub-tables.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir.errors import ConfigError

__all__ = [
    "HOOKS",
    "MCP_ARGS",
    "MCP_NAME",
    "HookSpec",
    "add_hooks",
    "add_server",
    "hook_action",
    "hook_command",
    "hook_entry",
    "hook_group",
    "mcp_server",
    "memdir_entries",
    "remove_hooks",
    "remove_server",
    "toml_drop",
    "toml_put",
    "toml_server",
]

MCP_NAME = "memdir"
MCP_ARGS = ("-m", "memdir", "mcp")


@dataclass(frozen=True)
class HookSpec:
    event: str  # the agent's event name
    action: str  # the `memdir hook` sub-command
    timeout: int  # seconds: the agent cancels the hook after this
    matcher: str | None = None  # None: every occurrence of the event


HOOKS = (
    HookSpec("SessionStart", "session-start", 10, "startup|resume|clear|compact"),
    HookSpec("UserPromptSubmit", "prompt", 10),
    HookSpec("Stop", "stop", 30),
    HookSpec("PreCompact", "pre-compact", 30),
    HookSpec("SessionEnd", "session-end", 5),
)


_BARE = re.compile(r"[\w@%+=:,./\\-]+")


def _quote(word: str) -> str:
    if _BARE.fullmatch(word) and (os.name == "nt" or "\\" not in word):
        return word
    return f'"{word}"' if os.name == "nt" else shlex.quote(word)


def hook_command(action: str, python: str) -> str:
    return f"{_quote(python)} -m memdir hook {action}"


def hook_entry(spec: HookSpec, python: str) -> dict[str, object]:
    return {"type": "command", "command": hook_command(spec.action, python),
            "timeout": spec.timeout}


def hook_group(spec: HookSpec, python: str) -> dict[str, object]:
    group: dict[str, object] = {} if spec.matcher is None else {"matcher": spec.matcher}
    group["hooks"] = [hook_entry(spec, python)]
    return group


_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=.*", re.DOTALL)


def hook_action(entry: object) -> str | None:
    """The memdir action a hook entry runs, or None when the entry is not memdir's."""
    if not isinstance(entry, dict) or entry.get("type", "command") != "command":
        return None
    command = entry.get("command")
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:1] == ["env"]:
        words = words[1:]
    while words and _ASSIGNMENT.fullmatch(words[0]):
        words = words[1:]
    if len(words) == 5 and words[1:4] == ["-m", "memdir", "hook"]:
        return words[4]
    program = re.split(r"[/\\]", words[0])[-1] if words else ""
    if len(words) == 3 and program in ("memdir", "memdir.exe") and words[1] == "hook":
        return words[2]
    return None


def mcp_server(python: str) -> dict[str, object]:
    """The ``mcpServers.memdir`` value of the JSON formats (Claude Code, Gemini, Cursor)."""
    return {"type": "stdio", "command": python, "args": list(MCP_ARGS)}


# -- merging into the JSON formats ------------------------------------------------------------


def _bad_shape(path: Path, what: str, fix: str) -> ConfigError:
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
        raise _bad_shape(path, '"hooks" is not a JSON object',
                         'make "hooks" an object mapping event names to lists')
    return hooks


def _positions(groups: list[Any]) -> list[tuple[int, int]]:
    return [(gi, hi) for gi, group in enumerate(groups)
            if isinstance(group, dict) and isinstance(group.get("hooks"), list)
            for hi, entry in enumerate(group["hooks"]) if hook_action(entry) is not None]


def memdir_entries(groups: list[Any]) -> list[dict[str, Any]]:
    """memdir's hook entries in one event's list of matcher groups, in order."""
    return [groups[gi]["hooks"][hi] for gi, hi in _positions(groups)]


def add_hooks(data: dict[str, Any], python: str, path: Path) -> list[str]:
    """Put memdir's hook for each event in ``data`` (a settings object), changed in place.

    An event without a memdir entry gets a matcher group of its own at the end of its list; a
    memdir entry that differs (another interpreter, another timeout) is rewritten where it is,
    and any further memdir entries of that event are removed."""
    hooks = _hooks_object(data, path, create=True)
    assert hooks is not None
    changes = []
    for spec in HOOKS:
        groups = hooks.setdefault(spec.event, [])
        if not isinstance(groups, list):
            raise _bad_shape(path, f'"hooks.{spec.event}" is not a list',
                             f'make "hooks.{spec.event}" a list of matcher groups')
        found = _positions(groups)
        if not found:
            groups.append(hook_group(spec, python))
            changes.append(f"added {spec.event} hook")
            continue
        was = copy.deepcopy(groups)
        for gi, hi in reversed(found[1:]):
            del groups[gi]["hooks"][hi]
            if not groups[gi]["hooks"]:
                del groups[gi]
        gi, hi = found[0]
        if len(groups[gi]["hooks"]) == 1:
            groups[gi] = hook_group(spec, python)
        else:
            groups[gi]["hooks"][hi] = hook_entry(spec, python)
        if groups != was:
            changes.append(f"updated {spec.event} hook")
    return changes


def remove_hooks(data: dict[str, Any], before: dict[str, Any] | None, path: Path) -> list[str]:
    """Remove every memdir hook entry; then the matcher groups that held only memdir entries,
    and event lists or ``"hooks"`` left empty, unless ``before`` (the file before memdir) had
    them."""
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
        raise _bad_shape(path, '"mcpServers" is not a JSON object',
                         'make "mcpServers" an object mapping server names to settings')
    return servers


def add_server(data: dict[str, Any], python: str, path: Path) -> list[str]:
    """Register memdir's MCP server; keys of an existing entry other than type, command and
    args (an ``env``, say) are kept."""
    servers = _servers(data, path, create=True)
    assert servers is not None
    old = servers.get(MCP_NAME)
    new = {**old, **mcp_server(python)} if isinstance(old, dict) else mcp_server(python)
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


# -- Codex's config.toml, as text -------------------------------------------------------------

_HEADER = re.compile(r"\s*\[\[?([^\[\]]+)\]\]?\s*(?:#.*)?")
_TABLE = "mcp_servers." + MCP_NAME


def _table_name(line: str) -> str | None:
    match = _HEADER.fullmatch(line.rstrip("\r\n"))
    if match is None:
        return None
    return ".".join(part.strip().strip("\"'") for part in match.group(1).split("."))


def _loose(line: str) -> bool:
    """A blank or comment line: at the end of a table, it belongs to what follows."""
    return not line.strip() or line.lstrip().startswith("#")


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a valid TOML basic string (or refused later)


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}",
                          f"fix the syntax of {path} (see https://toml.io) and run the command "
                          "again; memdir changed nothing") from None


def toml_server(path: Path, text: str) -> dict[str, Any] | None:
    """The ``[mcp_servers.memdir]`` table of a Codex config, or None."""
    servers = _parse_toml(path, text).get("mcp_servers")
    if servers is not None and not isinstance(servers, dict):
        raise _bad_shape(path, "mcp_servers is not a table", "make mcp_servers a table")
    server = (servers or {}).get(MCP_NAME)
    return server if isinstance(server, dict) else None


def _without_server(data: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    servers = data.get("mcp_servers")
    if isinstance(servers, dict):
        servers.pop(MCP_NAME, None)
        if not servers:
            del data["mcp_servers"]
    return data


def _blocks(lines: list[str], own: bool) -> list[tuple[int, int]]:
    """(start, end) of memdir's tables: the main one, or (``own``) it and its sub-tables. A
    table's trailing blank and comment lines are left to what follows."""
    out = []
    starts = [i for i, line in enumerate(lines) if _table_name(line) is not None]
    for n, start in enumerate(starts):
        name = _table_name(lines[start]) or ""
        if name == _TABLE or (own and name.startswith(_TABLE + ".")):
            end = starts[n + 1] if n + 1 < len(starts) else len(lines)
            while end > start + 1 and _loose(lines[end - 1]):
                end -= 1
            out.append((start, end))
    return out


def _checked(path: Path, old: str, new: str, python: str | None) -> str:
    """``new`` when it parses and differs from ``old`` only in memdir's server, else refuse."""
    try:
        after = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        after = None
    ok = after is not None and _without_server(after) == _without_server(_parse_toml(path, old))
    if ok:
        server = (after or {}).get("mcp_servers", {}).get(MCP_NAME)
        ok = server is None if python is None else (
            server is not None and server.get("command") == python
            and server.get("args") == list(MCP_ARGS))
    if ok and python is not None:  # the user's own settings of the server (env, timeouts) stay
        before = toml_server(path, old) or {}
        ok = _rest(before) == _rest(server or {})
    if not ok:
        args = ", ".join(_toml_str(a) for a in MCP_ARGS)
        raise ConfigError(
            f"{path}: memdir could not edit its [{_TABLE}] table without touching anything else "
            "(is mcp_servers written inline or as dotted keys?)",
            f"remove the memdir server from {path} by hand" if python is None else
            f"add it to {path} by hand: [{_TABLE}] with command = {_toml_str(python)} and "
            f"args = [{args}]")
    return new


def _rest(server: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in server.items() if k not in ("command", "args")}


def _kept_lines(lines: Sequence[str]) -> list[str]:
    """The lines of memdir's table but its ``command`` and ``args`` (a multi-line ``args``
    array included): the user's other keys of the server stay as written."""
    kept: list[str] = []
    in_args = False
    for line in lines:
        if in_args:
            in_args = "]" not in line.split("#", 1)[0]
            continue
        key, eq, value = line.partition("=")
        if eq and key.strip() in ("command", "args"):
            value = value.split("#", 1)[0]
            in_args = key.strip() == "args" and value.count("[") > value.count("]")
            continue
        kept.append(line)
    return kept


def toml_put(path: Path, text: str, python: str) -> tuple[str, list[str]]:
    """Codex config text with ``[mcp_servers.memdir]`` set to run ``python -m memdir mcp``."""
    server = toml_server(path, text)
    if server and server.get("command") == python and server.get("args") == list(MCP_ARGS):
        return text, []
    args = ", ".join(_toml_str(a) for a in MCP_ARGS)
    block = [f"[{_TABLE}]\n", f"command = {_toml_str(python)}\n", f"args = [{args}]\n"]
    lines = text.splitlines(keepends=True)
    found = _blocks(lines, own=False)
    if found:
        start, end = found[0]
        new = "".join(lines[:start] + block + _kept_lines(lines[start + 1:end]) + lines[end:])
    else:
        head = text if not text or text.endswith("\n") else text + "\n"
        new = head + ("\n" if head.strip() else "") + "".join(block)
    verb = "registered" if server is None else "updated"
    return _checked(path, text, new, python), [f"{verb} MCP server {MCP_NAME}"]


def toml_drop(path: Path, text: str) -> tuple[str, list[str]]:
    """Codex config text without ``[mcp_servers.memdir]`` and its sub-tables."""
    if toml_server(path, text) is None:
        return text, []
    lines = text.splitlines(keepends=True)
    found = _blocks(lines, own=True)
    for start, end in reversed(found):
        del lines[start:end]
        # the blank line memdir put before its table, or one of two now side by side
        if start and not lines[start - 1].strip() and (
                start == len(lines) or not lines[start].strip()):
            del lines[start - 1]
    return _checked(path, text, "".join(lines), None), [f"removed MCP server {MCP_NAME}"]
