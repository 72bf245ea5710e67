"""The warm daemon's answer to a whole hook event (``HOOK`` requests of
:mod:`memdir.agents.hook_client`): session-start and prompt computed with the store already
open and the model loaded.

Invariants:
- The answer is exactly what ``memdir hook EVENT`` prints in its own process
  (:mod:`memdir.agents.hook_events`), for the home this daemon serves and no other.
- Nothing is claimed for a session after the request's deadline: a late request is answered
  ``NO late`` and the hook, which has given up, runs by itself.
- A failure is logged to the hook log and answered ``NO``: the hook then runs by itself, so an
  agent never loses its memory to the daemon.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["Request", "answer", "http_answer", "parse_head", "stores_for"]

MAX_PAYLOAD = 16 << 20  # an agent's event is a few KB; a prompt may be long, never this long


class Request:
    """A parsed ``HOOK`` line: the event, the output format, the claim deadline, the home the
    hook means, its working directory and the size of the agent's JSON that follows."""

    __slots__ = ("by", "cwd", "event", "fmt", "home", "size")

    def __init__(self, event: str, fmt: str, by: float, home: str, cwd: str,
                 size: int) -> None:
        self.event, self.fmt, self.by = event, fmt, by
        self.home, self.cwd, self.size = home, cwd, size


def parse_head(line: bytes) -> Request | None:
    """The request of a ``HOOK`` line, or None when it is not one."""
    parts = line.decode("ascii", "replace").split()
    if len(parts) != 7 or parts[0] != "HOOK" or parts[1] not in ("session-start", "prompt"):
        return None
    try:
        by = float(parts[3])
        home = bytes.fromhex(parts[4]).decode("utf-8", "surrogateescape")
        cwd = bytes.fromhex(parts[5]).decode("utf-8", "surrogateescape")
        size = int(parts[6])
    except ValueError:
        return None
    if not 0 <= size <= MAX_PAYLOAD:
        return None
    return Request(parts[1], "json" if parts[2] == "json" else "text", by, home, cwd, size)


def _event(payload: bytes) -> dict[str, object] | None:
    """The agent's event: a JSON object (empty input: an empty one); None when it is not."""
    try:
        data = json.loads(payload.decode("utf-8", "surrogateescape")) if payload.strip() else {}
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _project(data: dict[str, object], fallback: str) -> str:
    """The event's ``cwd`` when it is a directory, else ``fallback``, absolute."""
    cwd = _text(data, "cwd")
    return os.path.abspath(cwd if cwd and os.path.isdir(cwd) else fallback)


def _text(data: dict[str, object], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def answer(request: Request, payload: bytes, home: Path,
           store: Callable[[str], Memdir], same_home: Callable[[str], bool]) -> bytes:
    """The framed answer (``OK <size>`` and the output, or ``NO <reason>``) to a hook event;
    ``store(project)`` gives the daemon's open store for a project directory."""
    from memdir.agents import hooks
    from memdir.agents.hook_events import output, prompt_text, start_text
    from memdir.core.errors import MemdirError

    if not same_home(request.home):
        return b"NO another home\n"
    data = _event(payload)
    if data is None:
        return b"NO not a JSON object\n"  # the hook says so in its log
    if hooks._disabled(home):
        return b"OK 0\n"
    session = _text(data, "session_id")
    try:
        md = store(_project(data, request.cwd))
        if request.event == "prompt":
            text = prompt_text(md, _text(data, "prompt"), session, request.by)
        else:
            text = start_text(md, session, request.by)
    except MemdirError as exc:
        hooks._log(request.event, f"daemon: {exc.message} (hint: {exc.hint}); the hook ran "
                                  "by itself", home)
        return b"NO error\n"
    except Exception as exc:  # the hook runs by itself and logs what it meets
        hooks._log(request.event, f"daemon: {exc.__class__.__name__}: {exc}; the hook ran "
                                  "by itself", home)
        return b"NO error\n"
    if text is None:
        return b"NO late\n"
    shown = output(request.event, text, request.fmt)
    body = f"{shown}\n".encode("utf-8", "surrogateescape") if shown else b""
    return b"OK %d\n" % len(body) + body


def http_answer(action: str, body: bytes, home: Path, store: Callable[[str], Memdir]) -> dict[
        str, object]:
    """The JSON document for one of Claude Code's HTTP hooks (:mod:`memdir.agents.http_hooks`):
    recall for ``prompt``; for the others, the work handed to a background process as the
    command hooks do, and an empty answer at once."""
    from memdir.agents import hooks
    from memdir.agents.hook_events import EVENT_NAMES, prompt_text
    from memdir.agents.hook_output import fit

    data = _event(body)
    if data is None:
        hooks._log(action, "http: the hook input is not a JSON object", home)
        return {}
    if hooks._disabled(home):
        return {}
    if action != "prompt":
        if data.get("stop_hook_active") is not True:
            hooks._detach(action, data)  # extraction and session-end: never on the agent's time
        return {}
    try:
        text = prompt_text(store(_project(data, os.getcwd())), _text(data, "prompt"),
                           _text(data, "session_id"))
    except Exception as exc:  # the agent goes on without recall; the log says why
        hooks._log(action, f"http: {exc.__class__.__name__}: {exc}", home)
        return {}
    if not text:
        return {}
    return {"hookSpecificOutput": {"hookEventName": EVENT_NAMES["prompt"],
                                   "additionalContext": fit(text)}}


def stores_for(home: Path, stores: MutableMapping[str, Memdir]) -> Callable[[str], Memdir]:
    """The daemon's store for a project: opened once, kept while the daemon runs, and
    reconciled before each request only when its directories changed (:mod:`memdir.core.dir_watch`;
    without inotify, before each request), so a hand edit shows up in the next recall."""
    from memdir.core.dir_watch import DirWatch
    from memdir.core.errors import MemdirError
    from memdir.core.model import SCOPES
    from memdir.memdir import Memdir

    def store(project: str) -> Memdir:
        md = stores.get(project)
        if md is None:
            md = Memdir(home=home, project=project or None, semantic=True,
                        sync_interval=0.0)
            paths = []
            for scope in SCOPES:
                try:
                    paths.append(md.directory(scope).path)
                except MemdirError:  # a team folder that is a symlink: never read anyway
                    continue
            md._watch = DirWatch(paths)
            stores[project] = md
        return md

    return store
