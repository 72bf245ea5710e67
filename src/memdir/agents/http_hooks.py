"""Claude Code's hooks over HTTP to the warm daemon: UserPromptSubmit, Stop, PreCompact and
SessionEnd POST the event's JSON to ``http://127.0.0.1:PORT/memdir/hooks/ACTION``, so a prompt
costs one loopback round trip instead of a process start.

Where the secret lives, and why that is safe:
- ``$MEMDIR_HOME/daemon/http.json`` holds the port and a random 256-bit token; the file is
  0600 in a 0700 directory, so no other local user can read it. ``memdir hooks install
  --agent claude-code --http`` writes the token into the ``Authorization`` header of
  memdir's entries in the user's ``~/.claude/settings.json``, which it makes 0600 too. Never a
  project's settings file (it may be committed), and never an environment variable: a
  variable in Claude Code's settings ``env`` reaches every tool process the agent runs, the
  header only Claude Code's request.
- The daemon listens on 127.0.0.1 only and answers a request only when its bearer token
  matches (compared in constant time), its ``Host`` is that address (no DNS rebinding) and it
  carries no ``Origin`` (no web page can make the call).

When the daemon is not reachable, Claude Code reports the hook as a non-blocking error and
the prompt goes on without recall; SessionStart stays a command hook, and it starts the
daemon (:mod:`memdir.agents.hooks`), so every session, resume, clear and compaction starts it
again; while HTTP hooks are set up the daemon stays up ``HTTP_IDLE_SECONDS`` without a request
(a working day and more); ``memdir doctor`` says when nothing listens on the port.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket
    from collections.abc import Callable

    from memdir.core.model import Problem

__all__ = ["ACTIONS", "HTTP_IDLE_SECONDS", "HttpTarget", "Request", "create",
           "doctor_problems", "forget", "load", "read_request", "reply", "restart_daemon",
           "serve_one", "url_action"]

ACTIONS = ("prompt", "stop", "pre-compact", "session-end")  # Claude Code: not SessionStart
HTTP_IDLE_SECONDS = 36 * 3600.0
_PATH = "/memdir/hooks/"
_MAX_HEAD = 64 << 10
_MAX_BODY = 16 << 20


@dataclass(frozen=True)
class HttpTarget:
    """Where memdir's HTTP hooks go, and the token that authenticates them."""

    port: int
    token: str

    def url(self, action: str) -> str:
        return f"http://127.0.0.1:{self.port}{_PATH}{action}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def url_action(url: object) -> str | None:
    """The action of a memdir HTTP hook URL (``http://127.0.0.1:PORT/memdir/hooks/ACTION``)."""
    if not isinstance(url, str) or not url.startswith("http://127.0.0.1:"):
        return None
    port, slash, path = url.removeprefix("http://127.0.0.1:").partition("/")
    action = ("/" + path).removeprefix(_PATH) if slash else ""
    ok = port.isdigit() and ("/" + path).startswith(_PATH) and action in ACTIONS
    return action if ok else None


def _file(home: Path) -> Path:
    return home / "daemon" / "http.json"


def load(home: Path) -> HttpTarget | None:
    """The HTTP hooks' port and token for ``home``; None when not set up, or unreadable: a
    symlink, a special file or an oversized one is not read (:mod:`memdir.core.safe_open`)."""
    from memdir.core.errors import UnsafeFileError
    from memdir.core.safe_open import CONFIG_FILE, read_file, real_folder

    try:
        if real_folder(home, "daemon") is None:
            return None
        data = json.loads(read_file(_file(home), CONFIG_FILE))
        port, token = data["port"], data["token"]
    except (OSError, UnsafeFileError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(port, int) or not 0 < port < 65536 or not isinstance(token, str) \
            or len(token) < 32:
        return None
    return HttpTarget(port, token)


def forget(home: Path) -> None:
    """Drop the port and token (the HTTP hooks are gone): doctor stops asking for a daemon,
    and a daemon started later listens on no port."""
    with contextlib.suppress(FileNotFoundError):
        _file(home).unlink()


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _taken(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def create(home: Path) -> HttpTarget:
    """The port and token of ``home``'s HTTP hooks, made (0600, in a 0700 directory) when
    there are none yet; the same ones on every later install, unless something other than
    memdir's daemon holds the port by then (a new port and token)."""
    found = load(home)
    if found is not None:
        from memdir.agents.daemon import ask

        if not _taken(found.port) or ask(home, {"op": "ping"}, timeout=1.0) is not None:
            return found
    import secrets

    from memdir.core.safe_open import real_folder

    target = HttpTarget(_free_port(), secrets.token_urlsafe(32))
    home.mkdir(parents=True, exist_ok=True)
    folder = real_folder(home, "daemon", create=True)  # never through a symlink
    assert folder is not None
    os.chmod(folder, 0o700)
    temp = folder / f".http.json.{os.getpid()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"port": target.port, "token": target.token}, fh)
    os.replace(temp, _file(home))
    return target


def doctor_problems(home: Path) -> list[Problem]:
    """``http-hooks``: Claude Code's HTTP hooks are set up for ``home`` but nothing answers
    on their port (a notice: the next session start starts the daemon);
    ``http-hooks-port``: something other than memdir's daemon holds it (a fault)."""
    import socket

    from memdir.core.model import Problem

    target = load(home)
    if target is None:
        return []
    where = f"127.0.0.1:{target.port}"
    try:
        with socket.create_connection(("127.0.0.1", target.port), timeout=0.5):
            pass
    except OSError:
        return [Problem("http-hooks", where, "Claude Code's HTTP hooks go here and nothing "
                        "listens: no action needed between sessions (a session start starts "
                        "the warm daemon), but prompts of a session already open go without "
                        "recall until then", "start a Claude Code session or run `memdir "
                        "daemon &`; `memdir hooks install --agent claude-code` without --http "
                        "goes back to command hooks")]
    from memdir.agents.daemon import ask

    if ask(home, {"op": "ping"}, timeout=1.0) is None:
        return [Problem("http-hooks-port", where, "Claude Code's HTTP hooks go here, but what "
                        "listens is not memdir's daemon: it would receive the prompts",
                        "run `memdir hooks install --agent claude-code --http` again: it "
                        "moves the hooks to a free port with a new token")]
    return []


def restart_daemon(home: str | None) -> str:
    """Stop the warm daemon of ``home`` (it listens on the port it read at start) and start
    one that serves the HTTP hooks (``hooks install --http``); what to tell the user."""
    from memdir.agents.daemon import ask, start_daemon
    from memdir.core.config import resolve_home

    where = resolve_home(home)
    running = ask(where, {"op": "ping"}, timeout=1.0)
    if running and isinstance(running.get("pid"), int):
        import signal
        import time

        with contextlib.suppress(OSError):
            os.kill(running["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 5
        while ask(where, {"op": "ping"}, timeout=0.3) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
    if start_daemon(where):
        return "started the warm daemon that serves them"
    return ("the warm daemon is not running (MEMDIR_DAEMON=0?): until one is, prompts go "
            "without recall; the next session start starts it")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes


def read_request(conn: socket.socket, deadline: float) -> Request | None:
    """One HTTP/1.1 request from ``conn`` (Content-Length or chunked body), or None when it
    is malformed, too large or too slow."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = _receive(conn, deadline) if len(data) <= _MAX_HEAD else None
        if chunk is None:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            return None
        headers[name.strip().lower()] = value.strip()
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    size = headers.get("content-length", "0")
    if not chunked and (not size.isdigit() or int(size) > _MAX_BODY):
        return None
    while True:
        if chunked:
            decoded, complete = _dechunk(body)
            if decoded is None:
                return None
            if complete:
                return Request(parts[0], parts[1], headers, decoded)
        elif len(body) >= int(size):
            return Request(parts[0], parts[1], headers, body[:int(size)])
        chunk = _receive(conn, deadline) if len(body) <= _MAX_BODY + 4096 else None
        if chunk is None:
            return None
        body += chunk


def _receive(conn: socket.socket, deadline: float) -> bytes | None:
    """What ``conn`` sends next, before ``deadline``; None when it closed, failed or time is
    up (a stalled or vanished client never takes the daemon down)."""
    import time

    left = deadline - time.monotonic()
    if left <= 0:
        return None
    conn.settimeout(left)
    try:
        chunk = conn.recv(65536)
    except OSError:  # timed out, reset
        return None
    return chunk or None


def _dechunk(raw: bytes) -> tuple[bytes | None, bool]:
    """A chunked body as far as ``raw`` holds it: (what it decodes to, whether it is
    complete); (None, True) when it is malformed."""
    out, at = b"", 0
    while True:
        end = raw.find(b"\r\n", at)
        if end < 0:
            return out, False
        try:
            length = int(raw[at:end].split(b";")[0].strip(), 16)
        except ValueError:
            return None, True
        start = end + 2
        if length == 0:
            return out, True  # trailers, if any, are not needed
        if len(raw) < start + length + 2:
            return out, False
        out += raw[start:start + length]
        at = start + length + 2


def reply(conn: socket.socket, status: int, document: object) -> None:
    """Send one JSON response and close the exchange (``Connection: close``)."""
    reasons = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
               404: "Not Found", 405: "Method Not Allowed"}
    body = json.dumps(document).encode()
    head = (f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with contextlib.suppress(OSError):
        conn.sendall(head + body)


def serve_one(conn: socket.socket, target: HttpTarget,
              handle: Callable[[str, bytes], object]) -> None:
    """Answer one HTTP hook call on ``conn``: checked as the module docstring says, then
    ``handle(action, body)`` gives the JSON document Claude Code reads."""
    import hmac
    import time

    request = read_request(conn, time.monotonic() + 5)
    if request is None:
        return reply(conn, 400, {"error": "not an HTTP request memdir can read"})
    if "origin" in request.headers or request.headers.get("host") != f"127.0.0.1:{target.port}":
        return reply(conn, 403, {"error": "only Claude Code on this machine may call"})
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {target.token}".encode()):
        return reply(conn, 401, {"error": "wrong or missing token",
                                 "hint": "run `memdir hooks install --agent claude-code "
                                         "--http` again"})
    action = request.path.removeprefix(_PATH) if request.path.startswith(_PATH) else ""
    if action not in ACTIONS:
        return reply(conn, 404, {"error": f"no hook at {request.path}"})
    if request.method != "POST":
        return reply(conn, 405, {"error": "POST the hook's JSON"})
    return reply(conn, 200, handle(action, request.body))
