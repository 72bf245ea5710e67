"""``memdir hooks install|uninstall|status``: the agent set-up commands of the CLI; and the
parser of ``memdir hook EVENT`` (what the installed hooks run), for its ``--help``.

Invariants: ``memdir hook`` itself runs without argparse (:func:`memdir.agents.hooks.hook_main`);
its parser here only answers ``--help``, and :data:`HOOK_EVENTS` names the same events as
:data:`memdir.agents.hooks.EVENTS` (a test checks) without importing that module. The work of
``hooks`` is :mod:`memdir.agents.hooks_install`'s; this module parses, prints text or
(``--json``) one JSON document, and lets :class:`~memdir.core.errors.MemdirError` through for the
CLI to show. ``install`` also prints MCP snippets for the agents memdir does not edit itself
(Gemini CLI, Cursor, Continue), unless the mcp extra is missing (then no server is
registered or printed, and the notes say how to add it). The hooks and the server carry
``--home`` / ``$MEMDIR_HOME`` when it is not the home they would find by themselves.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["HOOK_EVENTS", "add_hook_parser", "add_parser", "run", "snippets"]

AGENTS = ("claude-code", "codex")  # memdir.agents.hooks_install.AGENTS, without importing it here

# memdir.agents.hooks.EVENTS, in order, with what each does.
HOOK_EVENTS = (
    ("session-start", "print the session-start context (onboarding if no memories)"),
    ("prompt", "print the memories to add for this prompt, once per session"),
    ("stop", "capture memories from what is new in the transcript"),
    ("pre-compact", "the same, before the agent compacts its context"),
    ("session-end", "index the session, capture the rest, dream when due"),
)


def add_hook_parser(sub: Any) -> None:
    """Add ``hook`` to the ``memdir`` sub-commands (``sub`` may skip it: parser._OnlyOne).
    Not the common options: a hook takes --home and --project, and prints no --json."""
    text = "run an agent hook event (reads the agent's JSON on stdin; always exits 0)"
    events = "\n".join(f"  {name:<14} {what}" for name, what in HOOK_EVENTS)
    p = sub.add_parser(
        "hook", help=text, description=text,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"events:\n{events}\n\nA hook never fails the agent: errors go to\n"
               "$MEMDIR_HOME/logs/hooks.log and it exits 0. `memdir hooks install`\n"
               "registers the hooks with Claude Code or Codex.")
    p.add_argument("--home", help="memdir home (default: $MEMDIR_HOME or the user data dir)")
    p.add_argument("--project", metavar="PATH",
                   help="accepted and ignored: the agent's JSON names the project (cwd)")
    p.add_argument("event", choices=[name for name, _ in HOOK_EVENTS], metavar="EVENT",
                   help="the hook event: " + ", ".join(name for name, _ in HOOK_EVENTS))
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: plain context (default); json: Claude Code's hookSpecificOutput "
                        "document")


def add_parser(sub: argparse._SubParsersAction[Any], common: argparse.ArgumentParser) -> None:
    """Add ``hooks`` and its actions to the ``memdir`` sub-commands."""
    text = "connect memdir to coding agents: hooks and the MCP server in their settings"
    hooks = sub.add_parser("hooks", help=text, description=text)
    actions = hooks.add_subparsers(dest="hooks_action", metavar="ACTION", required=True)
    for name, help_text in (
        ("install", "add memdir's hooks and MCP server to an agent's settings (idempotent; "
                    "a backup is kept before the first change)"),
        ("uninstall", "remove exactly memdir's hooks and MCP server from an agent's settings"),
        ("status", "which memdir hooks and MCP server an agent has, and where"),
    ):
        p = actions.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.add_argument("--agent", choices=AGENTS, required=name != "status",
                       help="the agent" + (" (default: all)" if name == "status" else ""))
        p.add_argument("--scope", choices=("user", "project"), default="user",
                       help="user: the settings in your home directory (default); project: "
                            "the current project's (or --project's) settings files")
        if name != "status":
            p.add_argument("--dry-run", action="store_true",
                           help="show what would change and write nothing")
        if name == "install":
            p.add_argument("--no-trust", action="store_true",
                           help="Codex: do not ask Codex to trust memdir's hooks (it skips "
                                "them until you trust them with /hooks)")
            p.add_argument("--http", action="store_true",
                           help="Claude Code, user scope: prompt, stop, pre-compact and "
                                "session-end as HTTP hooks to the warm daemon on 127.0.0.1 "
                                "(no process per prompt); session-start starts the daemon")


def snippets(python: str, home: Path | None = None) -> list[dict[str, str]]:
    """Copy-paste MCP settings for Gemini CLI, Cursor and Continue (``home``: the memdir home
    the server must name)."""
    args = ["-m", "memdir", "mcp", *(() if home is None else ("--home", str(home)))]
    plain = {"mcpServers": {"memdir": {"command": python, "args": args}}}
    typed = {"mcpServers": {"memdir": {"type": "stdio", "command": python, "args": args}}}
    yaml_args = "".join(f"\n      - {json.dumps(a)}" for a in args)
    return [
        {"client": "Gemini CLI", "where": "~/.gemini/settings.json or "
         "<project>/.gemini/settings.json (merge into the object)",
         "text": json.dumps(plain, indent=2, ensure_ascii=False)},
        {"client": "Cursor", "where": "~/.cursor/mcp.json or <project>/.cursor/mcp.json",
         "text": json.dumps(typed, indent=2, ensure_ascii=False)},
        {"client": "Continue", "where": "<workspace>/.continue/mcpServers/memdir.yaml",
         "text": "name: memdir\nversion: 0.0.1\nschema: v1\nmcpServers:\n  - name: memdir\n"
                 f"    type: stdio\n    command: {json.dumps(python, ensure_ascii=False)}\n"
                 f"    args:{yaml_args}"},
    ]


def _report_text(data: dict[str, Any]) -> str:
    lines = [f"{data['action']} for {data['agent']} ({data['scope']} scope)"
             + (" (dry run: nothing written)" if data["dry_run"] else "")
             + (": nothing to change" if not data["changed"] else "")]
    for f in data["files"]:
        status = {"absent": "absent, nothing to do"}.get(f["status"], f["status"])
        if data["dry_run"] and f["changes"]:
            status = "would be " + status
        lines.append(f"  {f['path']}: {status}")
        lines.extend(f"    - {change}" for change in f["changes"])
        if f["backup"]:
            lines.append(f"    backup of the original: {f['backup']}")
    lines.extend(f"note: {note}" for note in data["notes"])
    for snippet in data.get("snippets", []):
        lines += ["", f"{snippet['client']}: add to {snippet['where']}", snippet["text"]]
    return "\n".join(lines)


def _status_text(data: dict[str, Any]) -> str:
    lines = [f"{data['agent']} ({data['scope']} scope): "
             + ("installed" if data["installed"] else "not fully installed"),
             f"  hooks in {data['hooks_file']}:"]
    for hook in data["hooks"]:
        state = ("installed" if hook["current"] else "out of date" if hook["installed"]
                 else "missing")
        lines.append(f"    {hook['event']:<17} {state:<12}"
                     + (f" {hook['command']}" if hook["command"] else ""))
    mcp = ("registered" if data["mcp_current"] else "registered, out of date"
           if data["mcp_registered"] else "not registered")
    if not data["mcp_available"]:
        from memdir.core.extras import pip_command

        mcp += ("; the mcp extra is not installed, so it cannot run: "
                f"{pip_command('mcp')} adds it")
    lines.append(f"  MCP server memdir in {data['mcp_file']}: {mcp}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``memdir hooks ACTION``; the exit status."""
    from memdir.agents import hooks_install

    project = Path(args.project).expanduser() if getattr(args, "project", None) else None
    home = hooks_install.carried_home(args.home)  # --home / $MEMDIR_HOME, when not implied
    if args.hooks_action == "status":
        found = [hooks_install.status(agent, args.scope, project=project, home=home).to_dict()
                 for agent in ([args.agent] if args.agent else AGENTS)]
        _print(args, found if not args.agent else found[0],
               "\n".join(_status_text(s) for s in found))
        return 0
    if args.hooks_action == "install":
        report = hooks_install.install(args.agent, args.scope, project=project,
                                       dry_run=args.dry_run, home=home,
                                       trust=not args.no_trust, http=args.http).to_dict()
        # No MCP server to paste anywhere without the mcp extra: the notes say so.
        report["snippets"] = snippets(sys.executable, home) if report["mcp_available"] else []
    else:
        report = hooks_install.uninstall(args.agent, args.scope, project=project,
                                         dry_run=args.dry_run).to_dict()
    _print(args, report, _report_text(report))
    return 0


def _print(args: argparse.Namespace, data: object, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2) if args.json else text)
