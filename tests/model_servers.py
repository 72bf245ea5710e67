"""Fake model APIs on 127.0.0.1 for the real agent clients: what the model would receive.

- :class:`AnthropicServer`: the Messages API (``POST /v1/messages``, streamed as SSE when
  asked, ``/v1/messages/count_tokens``), as Claude Code calls it with
  ``ANTHROPIC_BASE_URL``.
- :class:`ResponsesServer`: the OpenAI Responses API (``POST /v1/responses``, SSE), as
  Codex calls a custom ``model_providers`` entry with ``wire_api = "responses"``.

Both log every request (path, headers, JSON body) and answer from a script: each model
request takes the next :class:`Turn` (a text, or one tool call by name and input); with the
script empty they answer ``"done"``. A tool's name matches by suffix, so a test names
``memory_search`` and the client's own prefix (``mcp__memdir__``) does not matter; the tool
must be among those the request offers, else the turn is a text saying so. Requests are
threads of one ``ThreadingHTTPServer``; nothing is mocked inside the client.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One scripted model answer: ``text``, or a call of the offered tool whose name ends
    with ``tool`` (with ``arguments``)."""

    text: str = ""
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Logged:
    path: str
    headers: dict[str, str]
    body: Any


class _Base:
    def __init__(self, script: list[Turn] | None = None) -> None:
        self.requests: list[Logged] = []
        self.script = list(script or [])
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> _Base:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def model_requests(self) -> list[Any]:
        """The bodies of the requests that asked the model for an answer."""
        with self._lock:
            return [r.body for r in self.requests if self._is_model(r)]

    def _is_model(self, request: Logged) -> bool:
        raise NotImplementedError

    def _next(self, tools: list[str], body: Any) -> tuple[str, str, dict[str, Any]]:
        """(text, tool name, arguments) of the next scripted turn for a request offering
        ``tools`` (or naming a deferred one, by its whole name, anywhere in ``body``)."""
        with self._lock:
            turn = self.script.pop(0) if self.script else Turn("done")
        if not turn.tool:
            return turn.text, "", {}
        named = [t for t in tools if t == turn.tool or t.endswith(f"__{turn.tool}")
                 or t.endswith(f"_{turn.tool}")]
        if not named and "__" in turn.tool and turn.tool in json.dumps(body):
            named = [turn.tool]  # a deferred tool the client lists by name (Claude Code)
        if not named:
            return f"no tool {turn.tool} among {sorted(tools)}", "", {}
        return "", named[0], turn.arguments

    def _answer(self, path: str, body: Any) -> tuple[int, str, Iterator[bytes]]:
        raise NotImplementedError

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _read(self) -> Any:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def _serve(self) -> None:
                body = self._read()
                logged = Logged(self.path.split("?")[0],
                                {k.lower(): v for k, v in self.headers.items()}, body)
                with outer._lock:
                    outer.requests.append(logged)
                status, kind, chunks = outer._answer(logged.path, body)
                self.send_response(status)
                self.send_header("content-type", kind)
                if kind == "text/event-stream":
                    self.send_header("cache-control", "no-cache")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for chunk in chunks:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    self.close_connection = True
                    return
                data = b"".join(chunks)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = _serve  # noqa: N815
            do_GET = _serve  # noqa: N815
            do_HEAD = _serve  # noqa: N815

        return Handler


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _json(status: int, value: Any) -> tuple[int, str, Iterator[bytes]]:
    return status, "application/json", iter([json.dumps(value).encode()])


class AnthropicServer(_Base):
    """The Anthropic Messages API, as much as Claude Code uses."""

    def _is_model(self, request: Logged) -> bool:
        return request.path.endswith("/v1/messages") and isinstance(request.body, dict)

    def _answer(self, path: str, body: Any) -> tuple[int, str, Iterator[bytes]]:
        if path.endswith("/count_tokens"):
            return _json(200, {"input_tokens": 100})
        if not path.endswith("/v1/messages") or not isinstance(body, dict):
            return _json(404, {"type": "error", "error": {"type": "not_found_error",
                                                          "message": path}})
        tools = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
        text, tool, arguments = self._next(tools, body)
        if tool:
            block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{len(self.requests)}",
                                     "name": tool, "input": arguments}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": text}
            stop = "end_turn"
        message = {"id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
                   "model": body.get("model", "claude-test"), "content": [block],
                   "stop_reason": stop, "stop_sequence": None,
                   "usage": {"input_tokens": 100, "output_tokens": 5}}
        if not body.get("stream"):
            return _json(200, message)
        return 200, "text/event-stream", self._stream(message, block, stop)

    @staticmethod
    def _stream(message: dict[str, Any], block: dict[str, Any], stop: str) -> Iterator[bytes]:
        yield _sse("message_start", {"type": "message_start",
                                     "message": {**message, "content": [],
                                                 "stop_reason": None}})
        if block["type"] == "text":
            yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}})
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta",
                                                         "text": block["text"]}})
        else:
            yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {**block, "input": {}}})
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "input_json_delta",
                                                         "partial_json": json.dumps(
                                                             block["input"])}})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield _sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}})
        yield _sse("message_stop", {"type": "message_stop"})


class ResponsesServer(_Base):
    """The OpenAI Responses API, as much as Codex uses (streamed)."""

    def _is_model(self, request: Logged) -> bool:
        return request.path.endswith("/responses") and isinstance(request.body, dict)

    def _answer(self, path: str, body: Any) -> tuple[int, str, Iterator[bytes]]:
        if path.endswith("/models"):
            return _json(200, {"object": "list", "data": [], "models": []})
        if not path.endswith("/responses") or not isinstance(body, dict):
            return _json(404, {"error": {"message": path, "type": "not_found"}})
        tools = []
        namespaces: dict[str, str] = {}  # a namespace's tool (Codex: an MCP server's) -> it
        for t in body.get("tools") or []:
            if isinstance(t, dict):
                tools.append(t.get("name") or (t.get("function") or {}).get("name") or "")
                for inner in t.get("tools") or []:
                    if isinstance(inner, dict) and inner.get("name"):
                        tools.append(inner["name"])
                        namespaces[inner["name"]] = str(t.get("name"))
        text, tool, arguments = self._next(tools, body)
        n = len(self.requests)
        if tool:
            item: dict[str, Any] = {"type": "function_call", "id": f"fc_{n}",
                                    "call_id": f"call_{n}", "name": tool,
                                    "arguments": json.dumps(arguments), "status": "completed"}
            if tool in namespaces:
                item["namespace"] = namespaces[tool]
        else:
            item = {"type": "message", "id": f"msg_{n}", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}
        return 200, "text/event-stream", self._stream(f"resp_{n}", item)

    @staticmethod
    def _stream(rid: str, item: dict[str, Any]) -> Iterator[bytes]:
        response = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        yield _sse("response.created", {"type": "response.created", "response": response})
        yield _sse("response.output_item.added", {"type": "response.output_item.added",
                                                  "output_index": 0,
                                                  "item": {**item, "status": "in_progress"}})
        if item["type"] == "message":
            yield _sse("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": item["id"],
                "output_index": 0, "content_index": 0, "delta": item["content"][0]["text"]})
        yield _sse("response.output_item.done", {"type": "response.output_item.done",
                                                 "output_index": 0, "item": item})
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 105}
        yield _sse("response.completed", {"type": "response.completed", "response": {
            **response, "status": "completed", "output": [item], "usage": usage}})
