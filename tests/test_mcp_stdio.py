"""The MCP server's handshake front (:mod:`memdir.agents.mcp_stdio`): answers before the SDK
is loaded, the same answers the SDK gives, a clean hand-over, and a prompt, quiet exit.

Real processes over real pipes (``python -m memdir mcp``); the recorded catalog is compared
with what the SDK server answers now, so a tool changed without re-recording fails here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memdir.agents.mcp_server import record_catalog
from memdir.agents.mcp_stdio import catalog

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_the_recorded_catalog_is_what_the_sdk_answers() -> None:
    assert record_catalog() == catalog(), (
        "re-record it: python -c \"from memdir.agents.mcp_server import record_catalog, "
        "CATALOG; record_catalog(CATALOG)\"")


def _server(home: Path, repo: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_SEMANTIC": "0"}
    return subprocess.Popen([sys.executable, "-m", "memdir", "mcp"], cwd=repo, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _send(proc: subprocess.Popen[bytes], *messages: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    proc.stdin.flush()


def _finish(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Stop the server if it still runs; what is left on stdout and stderr (pipes closed)."""
    if proc.poll() is None:
        proc.kill()
    if proc.stdin is not None and not proc.stdin.closed:
        proc.stdin.close()
    proc.stdin = None
    out, err = proc.communicate(timeout=15)
    return out, err


def _read(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the server closed stdout"
    message: dict[str, Any] = json.loads(line)
    return message


def test_handshake_then_hand_over_to_the_sdk(home: Path, repo: Path) -> None:
    proc = _server(home, repo)
    try:
        _send(proc, INIT)
        init = _read(proc)
        assert init["id"] == 1 and init["result"]["protocolVersion"] == "2025-06-18"
        assert init["result"]["serverInfo"]["name"] == "memdir"
        _send(proc, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
              {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        tools = _read(proc)
        assert tools["id"] == 2
        assert {t["name"] for t in tools["result"]["tools"]} >= {"memory_learn",
                                                                "memory_recall"}
        assert _read(proc) == {"jsonrpc": "2.0", "id": 3, "result": {}}
        # The first other request goes to the SDK, which answers it and all that follow;
        # the client never sees a second answer to its initialize.
        _send(proc, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "memory_learn", "arguments": {"content": "Use pnpm", "type": "preference"}}},
              {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
              {"jsonrpc": "2.0", "id": 6, "method": "no/such/method"})
        answers = {m["id"]: m for m in (_read(proc), _read(proc), _read(proc))}
        assert set(answers) == {4, 5, 6}
        assert answers[4]["result"]["structuredContent"]["action"] == "stored"
        assert answers[5]["result"] == tools["result"]
        assert answers[6]["error"]["code"] == -32601
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=15) == 0
    finally:
        out, err = _finish(proc)
    assert out == b"" and b"Traceback" not in err


def test_an_unknown_protocol_version_gets_the_latest() -> None:
    known = catalog()
    assert known["versions"][-1] == "2025-11-25"


@pytest.mark.parametrize("after_sdk", [False, True])
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, "stdin"])
def test_a_prompt_quiet_exit(home: Path, repo: Path, how: object, after_sdk: bool) -> None:
    """SIGINT, SIGTERM or stdin closed: gone within seconds, status 0, no traceback,
    before and after the SDK took over."""
    proc = _server(home, repo)
    try:
        _send(proc, INIT, INITIALIZED)
        _read(proc)
        if after_sdk:
            _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "resources/list"})
            assert _read(proc)["id"] == 2
        started = time.monotonic()
        if how == "stdin":
            assert proc.stdin is not None
            proc.stdin.close()
        else:
            assert isinstance(how, signal.Signals)
            proc.send_signal(how)
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 5
    finally:
        _, err = _finish(proc)
    assert b"Traceback" not in err


def test_odd_messages_go_to_the_sdk_untouched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Params that are not an object, and a catalog that cannot be read: the front answers
    nothing it is unsure of and hands the stream over as it came."""
    import io

    from memdir.agents import mcp_stdio

    handed: list[list[str]] = []

    def sdk(home: object, project: object, stdin: Any, wire: Any) -> None:
        lines = []
        while line := stdin.readline():
            lines.append(json.loads(line).get("id", "n"))
        handed.append(lines)

    messages = [INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                                    "params": ["cursor"]},
                {"jsonrpc": "2.0", "id": 3, "method": "ping"}]
    raw = b"".join(json.dumps(m).encode() + b"\n" for m in messages)
    wire = io.BytesIO()
    assert mcp_stdio.serve(stdin=io.BytesIO(raw), wire=wire, sdk=sdk) == 0
    assert [json.loads(x)["id"] for x in wire.getvalue().splitlines()] == [1]
    assert handed == [[1, "n", 2, 3]]  # the replayed handshake, then the rest as it came
    monkeypatch.setattr(mcp_stdio, "CATALOG", Path("/nonexistent/mcp_catalog.json"))
    wire = io.BytesIO()
    assert mcp_stdio.serve(stdin=io.BytesIO(raw), wire=wire, sdk=sdk) == 0
    assert wire.getvalue() == b"" and handed[-1] == [1, "n", 2, 3]  # all of it the SDK's
