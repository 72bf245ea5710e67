"""The ``memdir`` command: its arguments put in order, errors turned into ``error:`` and
``hint:`` lines, and a quick exit. The parser lives in parser.py, the handlers in commands.py.

Invariants: every error a user can cause prints ``error: …`` and ``hint: …`` on stderr and
exits non-zero (2 for bad input, 3 for not found, 1 otherwise); a command that needs an extra
that is not installed says which and how to install it (exit 1), never "internal error";
``--json`` output is a single JSON document on stdout. Start-up imports only the standard
library, PyYAML and memdir's core (no frameworks): the hooks call this path on every agent
session.
"""

from __future__ import annotations

import os
import sys

# Not typing's: importing typing (and json, contextlib) costs every hook process milliseconds
# it does not need when the warm daemon answers it. Type checkers take any TYPE_CHECKING.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import NoReturn

    from memdir.core.errors import MemdirError

__all__ = ["COMMON_FLAGS", "COMMON_VALUED", "build_parser", "main", "run"]

# The options every command takes, before or after its name (cli.parser adds them to each).
COMMON_VALUED = ("--home", "--project")
COMMON_FLAGS = ("--json",)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``memdir`` argument parser (:func:`memdir.cli.parser.build_parser`, imported
    only when a command needs argparse: hooks and the MCP server do not)."""
    from memdir.cli.parser import build_parser as build

    return build(only)


def _past_common(given: list[str]) -> int:
    """How many leading arguments are common options (``--home DIR``, ``--project PATH``,
    ``--json``): where the command word is, when they come before it."""
    at = 0
    while at < len(given):
        word = given[at]
        if word in COMMON_VALUED:
            at += 2
        elif word in COMMON_FLAGS or word.split("=", 1)[0] in COMMON_VALUED:
            at += 1
        else:
            break
    return at


def _command_at(given: list[str]) -> int:
    """Where the command word is after leading common options; 0 if none lead."""
    at = _past_common(given)
    return at if 0 < at < len(given) and not given[at].startswith("-") else 0


def _mcp_args(given: list[str]) -> tuple[str | None, str | None] | None:
    """(home, project) when the command is ``mcp`` with nothing but ``--home`` and
    ``--project`` around it; None otherwise (argparse then says what is wrong)."""
    at = _command_at(given)
    if given[at:at + 1] != ["mcp"]:
        return None
    rest = given[:at] + given[at + 1:]
    found: dict[str, str] = {}
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if name not in COMMON_VALUED or (not eq and not rest):
            return None
        found[name] = value if eq else rest.pop(0)
    return found.get("--home"), found.get("--project")


def _hook_args(given: list[str]) -> list[str] | None:
    """The arguments for :func:`memdir.agents.hooks.hook_main` when the command is ``hook``, with
    the options before it (``memdir --home DIR hook prompt``); None for any other command."""
    at = _command_at(given)
    if given[at:at + 1] != ["hook"]:
        return None
    return given[:at] + given[at + 1:]


def _failed(args: argparse.Namespace, exc: MemdirError) -> int:
    """Show ``exc`` (one JSON error document with ``--json``); its exit status."""
    if getattr(args, "json", False):
        error = {"code": exc.code, "message": exc.message, "hint": exc.hint}
        import json

        print(json.dumps({"error": error}), file=sys.stderr)
    else:
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
    return exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    hook_args = _hook_args(given)
    if hook_args is not None and not {"-h", "--help"} & set(hook_args):
        # agent hooks: no argparse, never a non-zero exit (argparse only answers --help); the
        # warm daemon answers before anything of memdir's is imported, when it can
        from memdir.agents.hook_client import answer_hook

        done, raw = answer_hook(hook_args)
        if done:
            return 0
        from memdir.agents.hooks import hook_main

        return hook_main(hook_args, raw)
    mcp = _mcp_args(given)
    if mcp is not None:  # the MCP server: the handshake before anything heavy is imported
        from memdir.agents.mcp_stdio import serve

        return serve(*mcp)
    at = _command_at(given)
    if at:  # `memdir --home DIR search x`: the common options work before the command too
        given = [given[at], *given[:at], *given[at + 1:]]
    parser = build_parser(given[0] if given and not given[0].startswith("-") else None)
    if given and _past_common(given) >= len(given):
        parser.error("options but no command: put a command after them, as in "
                     "`memdir --home DIR stats` (`memdir --help` lists the commands)")
    args = parser.parse_args(given)
    if not args.command:
        parser.print_help()
        return 0
    from memdir.cli import commands
    from memdir.core.errors import MemdirError

    if args.command != "mcp":  # the MCP server's stdout is its protocol
        from memdir.cli import terminal

        terminal.install(json=bool(getattr(args, "json", False))
                         or (args.command == "export" and getattr(args, "dest", "") == "-"))
    try:
        return commands.run(args)
    except MemdirError as exc:
        return _failed(args, exc)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if isinstance(exc, ModuleNotFoundError):  # an extra not installed: say which
            from memdir.core.extras import from_import_error

            extra = from_import_error(exc, f"memdir {args.command}")
            if extra is not None:
                return _failed(args, extra)
        if os.environ.get("MEMDIR_DEBUG"):
            raise
        print(f"error: internal error: {exc.__class__.__name__}: {exc}\n"
              "hint: run again with MEMDIR_DEBUG=1 for a traceback and report it",
              file=sys.stderr)
        return 70


def run() -> NoReturn:
    """The ``memdir`` command (and ``python -m memdir``): :func:`main`, then a quick exit.

    By the time main() returns every command has closed what it opened (the index, files,
    sockets). What Python's own exit would still do is run the atexit handlers, flush the
    streams, and then free every object of every module one by one: 10-15 ms of each
    command at 10,000 memories, the agent's hooks included, for memory the kernel reclaims
    anyway. So: the handlers, the flush, ``os._exit``. A thread still running (none of
    memdir's commands leaves one) gets the usual exit, which waits for it."""
    code = main()
    threading = sys.modules.get("threading")
    if threading is not None and any(not t.daemon for t in threading.enumerate()
                                     if t is not threading.main_thread()):
        sys.exit(code)
    import atexit
    import contextlib

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # A closed pipe (`memdir list | head`) or a closed stream: nothing left to flush to.
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
