"""``memdir mcp`` over stdio: the handshake answered at once, the SDK loaded on first use.

An agent builds its tool list from ``initialize`` and ``tools/list`` and waits only so long
for them (Codex: ``mcp_optional_startup_grace_ms``, 1 s by default); importing the MCP SDK
alone takes longer than that on a slow machine. So this front answers ``initialize``,
``tools/list`` and ``ping`` from :data:`CATALOG` (``mcp_catalog.json``: the SDK server's
own answers, recorded; a test keeps the two equal) with the standard library alone, and
hands the connection to the SDK server (:mod:`memdir.agents.mcp_server`) on the first
other message: it replays the client's ``initialize`` and ``notifications/initialized`` to
the SDK, drops the SDK's answer to that replayed ``initialize`` (the client has one), and
from then on the SDK serves the stream as if it had from the start.

Invariants: stdout carries nothing but the protocol (file descriptor 1 points at stderr
while serving; the wire is a private duplicate); the SDK's answers are the only answers
after the hand-over; SIGINT, SIGTERM and the client closing stdin end the process promptly
with status 0 and no traceback.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["CATALOG", "catalog", "serve"]

CATALOG = Path(__file__).with_name("mcp_catalog.json")


def catalog() -> dict[str, Any]:
    """The recorded answers (``initialize`` result, ``tools/list`` result, the handshake
    protocol versions the SDK negotiates)."""
    data: dict[str, Any] = json.loads(CATALOG.read_text(encoding="utf-8"))
    return data


def _exit_on_signal(signum: int, frame: object) -> None:
    # A client stopping the server (SIGINT, SIGTERM) wants it gone now: a worker thread
    # blocked on stdin would keep a normal exit waiting. Writes are atomic (temp file +
    # rename), so nothing is left half done.
    os._exit(0)


class _Replayed:
    """The client's stream as the SDK reads it: the replayed handshake lines first."""

    def __init__(self, first: list[str], rest: IO[bytes]) -> None:
        self._first = list(first)
        self._rest = rest

    def readline(self, *args: Any) -> str:
        if self._first:
            return self._first.pop(0)
        return self._rest.readline().decode("utf-8", "replace")

    def close(self) -> None:
        pass


class _Answers:
    """The wire as the SDK writes it, without its answer to the replayed ``initialize``."""

    def __init__(self, wire: IO[bytes], drop: object) -> None:
        self._wire = wire
        self._drop = drop
        self._dropped = drop is None

    def write(self, text: str) -> int:
        if not self._dropped:
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == self._drop \
                    and "method" not in message:
                self._dropped = True
                return len(text)
        self._wire.write(text.encode("utf-8"))
        return len(text)

    def flush(self) -> None:
        self._wire.flush()

    def close(self) -> None:
        pass


def _answer(wire: IO[bytes], ident: object, result: Any) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": ident, "result": result},
                      separators=(",", ":"), ensure_ascii=False)
    wire.write(line.encode("utf-8") + b"\n")
    wire.flush()


def serve(home: str | None = None, project: str | None = None,
          stdin: IO[bytes] | None = None, wire: IO[bytes] | None = None,
          sdk: Callable[..., None] | None = None) -> int:
    """Serve one client until it closes stdin (module docstring). ``stdin``, ``wire`` and
    ``sdk`` (how the SDK server is run) are for tests; by default the process's own."""
    from memdir.core.extras import installed, missing

    if not installed("mcp"):  # say so now, not after a handshake that promises tools
        exc = missing("mcp", "memdir mcp")
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    own = stdin is None or wire is None
    if stdin is None or wire is None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _exit_on_signal)
        stdin = sys.stdin.buffer
        wire = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)  # stray output of anything loaded later goes to stderr
    try:
        known: dict[str, Any] | None = catalog()
    except (OSError, ValueError):  # a broken install: the SDK answers everything
        known = None
    replay: list[str] = []
    init_id: object = None
    while True:
        raw = stdin.readline()
        if not raw:
            return 0  # the client went away before asking for anything else
        line = raw.decode("utf-8", "replace")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        method = message.get("method") if isinstance(message, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict):
            params = {} if params is None else None  # a list or a string: the SDK's to refuse
        if known is None or params is None:
            method = None
        if method == "initialize" and init_id is None and "id" in message:
            assert known is not None and params is not None
            asked = params.get("protocolVersion")
            result = dict(known["initialize"])
            result["protocolVersion"] = asked if asked in known["versions"] \
                else known["versions"][-1]
            init_id = message["id"]
            replay.append(line)
            _answer(wire, init_id, result)
        elif method == "notifications/initialized" and init_id is not None:
            replay.append(line)
        elif method in ("tools/list", "ping") and init_id is not None and "id" in message \
                and params is not None and not params.get("cursor"):
            assert known is not None
            _answer(wire, message["id"], known["tools"] if method == "tools/list" else {})
        else:  # anything else is the SDK's, this message included
            replay.append(line)
            break
    run = sdk or _run_sdk
    run(home, project, _Replayed(replay, stdin), _Answers(wire, init_id))
    if own:
        wire.flush()
        os._exit(0)  # the client closed stdin: done, whatever worker thread still waits
    return 0


def _run_sdk(home: str | None, project: str | None, stdin: _Replayed,
             wire: _Answers) -> None:
    """The SDK server over the replayed stream (imports the SDK: the slow part)."""
    import anyio
    from mcp.server.stdio import stdio_server

    from memdir.agents.mcp_server import build_server
    from memdir.core.errors import MemdirError
    from memdir.memdir import Memdir

    try:
        memdir = Memdir(home, project)
        server = build_server(md=memdir)
    except MemdirError as exc:
        print(f"memdir mcp: error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    memdir.warm_vectors()
    lowlevel = server._lowlevel_server

    async def main() -> None:
        async with stdio_server(anyio.wrap_file(stdin),  # type: ignore[arg-type]
                                anyio.wrap_file(wire)) as (read, write):  # type: ignore[arg-type]
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    anyio.run(main)
