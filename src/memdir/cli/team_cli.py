"""``memdir team pull|status``: the team server as seen from this machine.

Invariants: the work is the facade's (:meth:`memdir.Memdir.pull_team`,
:meth:`memdir.Memdir.team_status`); this module parses, prints text or (``--json``) one JSON
document, and lets :class:`~memdir.core.errors.MemdirError` through for the CLI to show. ``pull``
always asks the server (no throttle) and fails with a hint when it cannot; ``status`` exits 1
when a configured server does not answer. Nothing is imported at start-up beyond argparse.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["add_parser", "run"]

_NO_SERVER = ("no team server configured: the team scope is the repository's .memdir/team/ "
              "folder")
_SET_SERVER = ("set MEMDIR_SERVER=http://host:8765 and MEMDIR_TOKEN (or [server] url and token "
               "in $MEMDIR_HOME/config.toml) to share team memory through `memdir serve`")


def add_parser(sub: argparse._SubParsersAction[Any], common: argparse.ArgumentParser) -> None:
    """Add ``team`` and its actions to the ``memdir`` sub-commands."""
    text = "the team scope over the network: pull the team server's memories, show the mirror"
    team = sub.add_parser("team", help=text, description=text)
    actions = team.add_subparsers(dest="team_action", metavar="ACTION", required=True)
    for name, help_text in (
        ("pull", "update the local mirror of the team server's memories now"),
        ("status", "which team server is in use, what the mirror holds, the last pull"),
    ):
        actions.add_parser(name, parents=[common], help=help_text, description=help_text)


def _pull(md: Memdir, args: argparse.Namespace) -> int:
    from memdir.core.errors import ServerError

    if md.server is None:
        raise ServerError(_NO_SERVER, _SET_SERVER)
    report = md.pull_team(force=True)
    assert report is not None
    md.reconcile()
    for refused in report.refused:
        print(f"warning: refused a team memory: {refused}", file=sys.stderr)
    text = (f"pulled {report.total} team memories from {report.url}: "
            f"{len(report.written)} written, {len(report.removed)} removed, "
            f"{report.unchanged} unchanged" + (f", {len(report.refused)} refused"
                                               if report.refused else ""))
    _print(args, report.to_dict(), text)
    return 0


def _status(md: Memdir, args: argparse.Namespace) -> int:
    status = md.team_status()
    data = status.to_dict()
    if status.url is None:
        text = f"{_NO_SERVER} ({status.directory})\nhint: {_SET_SERVER}"
    else:
        last = status.last_pull
        when = last.get("at", "never")
        how = {True: "ok", False: f"failed: {last.get('error', '')}", None: "in progress"}
        lines = [f"team server: {status.url}" + ("" if status.token else " (no token set)"),
                 "  reachable: " + ("yes" if status.reachable else f"no: {status.error}"),
                 f"  mirror: {status.directory}",
                 f"  {status.active} active, {status.archived} archived team memories",
                 f"  last pull: {when}" + (f" ({how[last.get('ok')]})" if last else "")]
        text = "\n".join(lines)
    _print(args, data, text)
    return 1 if status.reachable is False else 0


def run(md: Memdir, args: argparse.Namespace) -> int:
    """Run ``memdir team ACTION``; the exit status."""
    return _pull(md, args) if args.team_action == "pull" else _status(md, args)


def _print(args: argparse.Namespace, data: object, text: str) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2) if args.json else text)
