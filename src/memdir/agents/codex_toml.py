"""Codex's ``config.toml``, edited as text: memdir's ``[mcp_servers.memdir]`` table set or
removed, every other byte of the file kept (no file I/O).

Invariants:
- memdir owns the ``[mcp_servers.memdir]`` table and its sub-tables, nothing else. Its
  ``command`` and ``args`` are set; the user's other keys of the table stay as written.
- Every edit is checked by parsing the result: anything but memdir's server (and, when it is
  set, anything of it but ``command`` and ``args``) differing from before, or a server TOML
  does not hold as a plain table, is refused with a ConfigError saying what to do by hand.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memdir.agents.hooks_agents import MCP_ARGS, MCP_NAME, bad_shape
from memdir.core.errors import ConfigError

__all__ = ["toml_drop", "toml_put", "toml_server"]

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
        raise bad_shape(path, "mcp_servers is not a table", "make mcp_servers a table")
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


def _checked(path: Path, old: str, new: str, python: str | None,
             args: Sequence[str] = MCP_ARGS) -> str:
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
            and server.get("args") == list(args))
    if ok and python is not None:  # the user's own settings of the server (env, timeouts) stay
        before = toml_server(path, old) or {}
        ok = _rest(before) == _rest(server or {})
    if not ok:
        listed = ", ".join(_toml_str(a) for a in args)
        raise ConfigError(
            f"{path}: memdir could not edit its [{_TABLE}] table without touching anything else "
            "(is mcp_servers written inline or as dotted keys?)",
            f"remove the memdir server from {path} by hand" if python is None else
            f"add it to {path} by hand: [{_TABLE}] with command = {_toml_str(python)} and "
            f"args = [{listed}]")
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


def toml_put(path: Path, text: str, python: str,
             args: Sequence[str] = MCP_ARGS) -> tuple[str, list[str]]:
    """Codex config text with ``[mcp_servers.memdir]`` set to run ``python`` with ``args``
    (``-m memdir mcp`` and maybe ``--home HOME``: :func:`memdir.agents.hooks_agents.mcp_args`)."""
    server = toml_server(path, text)
    if server and server.get("command") == python and server.get("args") == list(args):
        return text, []
    listed = ", ".join(_toml_str(a) for a in args)
    block = [f"[{_TABLE}]\n", f"command = {_toml_str(python)}\n", f"args = [{listed}]\n"]
    lines = text.splitlines(keepends=True)
    found = _blocks(lines, own=False)
    if found:
        start, end = found[0]
        new = "".join(lines[:start] + block + _kept_lines(lines[start + 1:end]) + lines[end:])
    else:
        head = text if not text or text.endswith("\n") else text + "\n"
        new = head + ("\n" if head.strip() else "") + "".join(block)
    verb = "registered" if server is None else "updated"
    return _checked(path, text, new, python, args), [f"{verb} MCP server {MCP_NAME}"]


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
