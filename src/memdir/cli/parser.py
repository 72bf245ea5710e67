"""The ``memdir`` argument parser: every command, its arguments and their help, and argparse
with memdir's error shape (``error:`` and ``hint:`` lines, exit 2; one JSON error with
``--json``).

Invariants: building the parser imports only the standard library and memdir's core; with
``only``, :func:`build_parser` builds just the command being run (argparse formats every
argument it adds, a cost on every hook).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from memdir import __version__
from memdir.cli import hooks_cli, serve_cli, team_cli
from memdir.cli.main import COMMON_FLAGS, COMMON_VALUED

__all__ = ["COMMON_FLAGS", "COMMON_VALUED", "build_parser"]

DESCRIPTION = """memdir: memory that lasts for AI coding agents.
Memories are Markdown files (one per memory) in memory directories per scope (user, project,
team); a SQLite index makes them fast to search. Run `memdir COMMAND --help` for details."""


def _width() -> int:
    """The help width ``shutil.get_terminal_size`` would give argparse: $COLUMNS, else the
    terminal's, else 80; less 2, as argparse takes."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return (columns or 80) - 2


class _Parser(argparse.ArgumentParser):
    """argparse with memdir's error shape: an ``error:`` line, a ``hint:`` line, exit 2."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse formats every argument it adds, and its formatter imports shutil (with
        # zlib, bz2 and lzma) for the terminal width: ~2 ms of every command. Same width, no
        # shutil.
        return self.formatter_class(prog=self.prog, width=_width())  # type: ignore[call-arg]

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        hint = f"run `{self.prog} --help` to see the arguments"
        if "--json" in sys.argv:
            error = {"code": "usage", "message": message, "hint": hint}
            print(json.dumps({"error": error}), file=sys.stderr)
        else:
            print(f"error: {message}\nhint: {hint}", file=sys.stderr)
        sys.exit(2)


def _common() -> _Parser:
    common = _Parser(add_help=False)
    common.add_argument("--home", help="memdir home (default: $MEMDIR_HOME or the user data dir)")
    common.add_argument("--project", metavar="PATH",
                        help="project directory whose memories to use (default: current dir)")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    return common


SCOPE_HELP = ("where the memory goes: user (every project), project (this one; the "
              "default) or team (the repository's .memdir/team, or the team server)")
REF_HELP = "memory id or file name"


def _common_epilog(common: argparse.ArgumentParser) -> str:
    """The common options for the top-level help: every command takes them, before or after
    the command word, and they are not the top-level parser's own arguments (main.py moves
    them after the command)."""
    lines = ["options of every command (before or after it, as in `memdir --home DIR stats`):"]
    for action in common._actions:
        name = action.option_strings[0]
        if action.nargs != 0:
            name += f" {action.metavar or action.dest.upper()}"
        lines.append(f"  {name:<16} {action.help}")
    return "\n".join(lines)


def _filters(p: argparse.ArgumentParser, *, scope: bool = True) -> None:
    p.add_argument("--type", action="append", dest="types", metavar="TYPE",
                   help="only this type (repeatable; aliases accepted)")
    if scope:
        p.add_argument("--scope", action="append", dest="scopes",
                       choices=("user", "project", "team"), help="only this scope (repeatable)")
    p.add_argument("--tags", help="only memories with any of these tags (comma-separated)")
    p.add_argument("--paths", help="only memories whose path globs cover these files (comma-sep.)")


def _fields(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", help="short title (default: the first line of the content)")
    p.add_argument("--description", help="one line: the recall key (default: first line)")
    p.add_argument("--tags", help="comma-separated tags")
    p.add_argument("--paths", help="comma-separated globs of files this memory matters for")
    p.add_argument("--relevance",
                   help="0.0-1.0 or critical/high/medium/normal/low (default: by type, else 0.9)")
    p.add_argument("--meta", action="append", metavar="KEY=VALUE",
                   help="an extra frontmatter key (repeatable)")


def _database(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument("--database", metavar="URL", default=os.environ.get("MEMDIR_DATABASE") or None,
                   help=f"{text} (postgresql://user@host:5432/db; default: $MEMDIR_DATABASE)")


class _Skip:
    """Stands in for the parser of a command that is not being run: every call is a no-op."""

    def __getattr__(self, name: str) -> Callable[..., _Skip]:
        return lambda *args, **kwargs: self


class _OnlyOne:
    """The sub-commands action, building only the parser of the command being run: argparse
    builds some 40 parsers otherwise, about 15 ms of every command's start."""

    def __init__(self, sub: argparse._SubParsersAction[Any], only: str | None) -> None:
        self._sub, self.only, self.found = sub, only, False

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if self.only is not None and name != self.only:
            return _Skip()
        self.found = self.only is not None
        return self._sub.add_parser(name, **kwargs)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``memdir`` parser; with ``only``, just that command's (the whole parser when
    ``only`` names no command, so the error lists them)."""
    common = _common()
    parser = _Parser(prog="memdir", description=DESCRIPTION, epilog=_common_epilog(common),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"memdir {__version__}")
    sub: Any = _OnlyOne(parser.add_subparsers(dest="command", metavar="COMMAND",
                                              parser_class=_Parser), only)

    def add(name: str, help_text: str) -> Any:  # a _Skip for the commands not run
        return sub.add_parser(name, parents=[common], help=help_text, description=help_text)

    p = add("store", "store a memory (an exact duplicate reinforces the existing one)")
    p.add_argument("content", help="the text to remember ('-' reads stdin)")
    p.add_argument("--type", required=True, help="memory type (see `memdir types`)")
    p.add_argument("--scope", default="project", choices=("user", "project", "team"),
                   help=SCOPE_HELP)
    _fields(p)
    p.add_argument("--context", metavar="TEXT",
                   help="search context: text that helps find the memory but is never shown "
                        "or injected, e.g. the message before it ('Kevin: are you going to "
                        "the concert?'); one line, at most 1,000 characters")
    p.add_argument("--date", metavar="YYYY-MM-DD",
                   help="the day the memory is about, when not today (searchable as words: "
                        "month, year, weekday)")

    p = add("search", "full-text search (BM25 ranked, strength-weighted)")
    p.add_argument("query", help="words to search for (quote a phrase)")
    p.add_argument("--limit", type=int, default=10, help="at most this many hits (default 10)")
    p.add_argument("--archived", action="store_true", help="include archived memories")
    p.add_argument("--sessions", action="store_true",
                   help="also search indexed session transcripts (see index-session)")
    p.add_argument("--hybrid", action="store_true",
                   help="rank by meaning too (needs the embed extra; loads the model)")
    _filters(p)

    p = add("about", "everything known about a topic, grouped by type")
    p.add_argument("topic", help="the topic: words, a name, a file")
    p.add_argument("--limit", type=int, default=50,
                   help="at most this many memories (default 50)")
    _filters(p)

    p = add("decisions", "all decision memories")
    p.add_argument("--limit", type=int, help="at most this many (default: all)")
    _filters(p)

    p = add("recent", "the N most recent memories")
    p.add_argument("n", nargs="?", type=int, default=10,
                   help="how many memories (default 10)")
    _filters(p)

    p = add("list", "list memories with filters")
    p.add_argument("--status", default="active", choices=("active", "archived", "all"),
                   help="which memories (default: active)")
    p.add_argument("--limit", type=int, help="at most this many (default: all)")
    p.add_argument("--order", default="relevance",
                   choices=("relevance", "recent", "updated", "name"),
                   help="sort by relevance (the default), creation (recent), last change "
                        "(updated) or name")
    _filters(p)

    p = add("context", "the session-start context an agent receives, within a token budget")
    p.add_argument("--query", help="the task at hand (first prompt, branch name...) to rank by")
    p.add_argument("--budget", type=int, default=800, metavar="TOKENS",
                   help="hard cap on the output, in tokens (default 800; see README)")
    p.add_argument("--format", default="markdown",
                   choices=("markdown", "prompt", "json", "snippets"),
                   help="markdown (default); prompt: wrapped for an agent's system prompt; "
                        "json; snippets: one line per memory")
    p.add_argument("--limit", type=int, help="at most this many memories")
    p.add_argument("--paths", help="comma-separated files being worked on (boosts memories "
                   "whose path globs cover them)")

    p = add("recall", "the memories to add for one user prompt, once per session")
    p.add_argument("prompt", help="the user's prompt ('-' reads stdin)")
    p.add_argument("--session", required=True, metavar="ID", help="the agent's session id")
    p.add_argument("--limit", type=int, default=5, help="at most this many (max 5)")
    p.add_argument("--no-llm", action="store_true",
                   help="ranked search only, even when an LLM is configured")
    p.add_argument("--paths", help="comma-separated files being worked on")

    p = add("episode", "record an event and its outcome")
    p.add_argument("event", help="what happened ('-' reads stdin)")
    p.add_argument("--outcome", help="e.g. success, failure, partial, or a sentence")
    p.add_argument("--tags", help="comma-separated tags")
    p.add_argument("--scope", default="project", choices=("user", "project", "team"),
                   help=SCOPE_HELP)

    p = add("procedure", "save a named workflow's steps, or count a run of it")
    p.add_argument("name", help="the workflow's name (an existing one is updated)")
    p.add_argument("--step", action="append", dest="steps", metavar="STEP",
                   help="one step, in order (repeatable); replaces the saved steps")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--success", action="store_true", help="count a successful run")
    run.add_argument("--failure", action="store_true", help="count a failed run")
    p.add_argument("--description", help="one line: when to use it")
    p.add_argument("--tags", help="comma-separated tags")
    p.add_argument("--scope", default="project", choices=("user", "project", "team"),
                   help=SCOPE_HELP)

    p = add("index-session", "index a finished transcript so search can find what was said")
    p.add_argument("transcript", help="a Claude Code / Codex .jsonl, a .json message list, "
                   "or a text file (with --format text)")
    p.add_argument("--session", metavar="ID", help="the session id (default: the file's)")
    p.add_argument("--format", choices=("auto", "text"), default="auto",
                   help="text: also read a file in no agent format as plain text "
                   "('User:' / 'Assistant:' lines)")

    p = add("extract", "capture memories from a conversation transcript (LLM, else rules)")
    p.add_argument("--transcript", required=True, metavar="FILE",
                   help="a Claude Code / Codex .jsonl, a .json message list, a text file "
                   "(with --format text), or '-' for stdin")
    p.add_argument("--dry-run", action="store_true", help="show what would be stored")
    p.add_argument("--no-llm", action="store_true", help="rule extraction only")
    p.add_argument("--session", metavar="ID", help="session id (default: the transcript's)")
    p.add_argument("--format", choices=("auto", "text"), default="auto",
                   help="text: also read a file in no agent format as plain text "
                   "('User:' / 'Assistant:' lines)")
    p.add_argument("--scope", default="project", choices=("user", "project", "team"),
                   help="the scope the captured memories go to (default: project)")

    p = add("onboard", "first-session instructions for a user without memories; "
                       "keep a User Profile section in CLAUDE.md")
    p.add_argument("--claude-md", metavar="PATH",
                   help="write the ## User Profile section into this file (kept in place)")

    hooks_cli.add_hook_parser(sub)

    p = add("consolidate", "merge near-duplicates, archive weak memories, promote recurring "
                           "ones (prints the plan; --yes applies it)")
    p.add_argument("--dry-run", action="store_true", help="only print the plan (default "
                   "unless --yes)")
    p.add_argument("--yes", action="store_true", help="apply the plan")
    p.add_argument("--limit", type=int, default=20, metavar="N",
                   help="list at most N operations of each kind, beside the totals "
                        "(default 20; 0 lists all)")
    p = add("log", "append a timestamped line to today's log (consolidate gathers logs)")
    p.add_argument("text", help="what happened ('-' reads stdin)")
    p.add_argument("--scope", default="project", choices=("user", "project"),
                   help="whose log: the project's (default) or the user's")
    add("history", "consolidation plans applied so far (and interrupted ones)")
    add("undo", "reverse the newest consolidation plan, an interrupted one too")
    p = add("dream", "consolidate in the background way: only when 24 h and 5 sessions have "
                     "passed since the last dream (--force: now)")
    p.add_argument("--force", action="store_true", help="ignore the time and session gates")

    hooks_cli.add_parser(sub, common)
    serve_cli.add_parser(sub, common)
    team_cli.add_parser(sub, common)

    p = add("daemon", "keep the embedding model warm for hooks (exits when idle)")
    p.add_argument("--idle", type=float, default=900.0, metavar="SECONDS",
                   help="exit after this long without a request (default 900)")

    add("mcp", "run the MCP server on stdio (for Claude Code, Codex, Cursor, Gemini CLI...)")

    p = add("get", "show one memory (by id or file name)")
    p.add_argument("ref", help=REF_HELP)

    p = add("update", "change a memory's content or fields (id and file stay)")
    p.add_argument("ref", help=REF_HELP)
    p.add_argument("--content", help="new body ('-' reads stdin)")
    p.add_argument("--reinforce", action="store_true", help="count an explicit reinforcement")
    _fields(p)

    p = add("reclassify", "move a memory to another type (same id, new file name)")
    p.add_argument("ref", help=REF_HELP)
    p.add_argument("type", help="the new type (see `memdir types`)")

    for name, text in (("archive", "archive a memory (searchable with --archived, never injected)"),
                       ("restore", "bring an archived memory back"),
                       ("delete", "delete a memory's file (archive is reversible; this is not)")):
        add(name, text).add_argument("ref", help=REF_HELP)

    add("stats", "counts by type, scope and status")
    p = add("reindex", "rebuild the index from the memory files alone")
    p.add_argument("--embeddings", action="store_true",
                   help="also compute the embedding vectors (needs the embed extra)")
    p.add_argument("--progress", action="store_true", help="show the progress bar even when "
                   "stderr is not a terminal")
    add("doctor", "report broken files, ignored settings and oversized indexes (exit 1 if any)")
    add("types", "the memory types of each store's taxonomy")

    p = add("export", "write all memories to a folder of Markdown files or a JSON Lines file")
    p.add_argument("dest", help="a folder (markdown) or a file, '-' for stdout (jsonl)")
    p.add_argument("--format", choices=("markdown", "jsonl"), default=None,
                   help="default: jsonl when DEST ends with .jsonl or is '-', else markdown")
    p.add_argument("--scope", action="append", dest="scopes", choices=("user", "project", "team"),
                   help="only this scope (repeatable; default: all)")
    _database(p, "export from this PostgreSQL store instead of the home")

    p = add("import", "import a folder of Markdown memory files or a JSON Lines file")
    p.add_argument("src", help="a folder of .md files, a .jsonl file, or '-' for stdin")
    p.add_argument("--scope", choices=("user", "project", "team"),
                   help="put everything in this scope (default: each memory's own scope)")
    _database(p, "import into this PostgreSQL store instead of the home")

    p = add("adopt", "use Claude Code's auto-memory directory for this project, in place")
    p.add_argument("--from", dest="source", metavar="DIR",
                   help="the directory (default: ~/.claude/projects/<key>/memory)")
    if only is not None and not sub.found:
        return build_parser()
    return parser
