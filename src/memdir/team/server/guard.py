"""The guard: a pure ASGI middleware in front of every request of the HTTP API.

In order, for each HTTP request it:

1. adds the security headers to every answer (``X-Content-Type-Options: nosniff``, a
   ``Content-Security-Policy`` of ``default-src 'self'`` — the web page has no inline scripts
   or styles — and ``X-Frame-Options: DENY``);
2. refuses an ``/api/...`` request without the right Bearer token (401), before the body is
   read or the route looked up, so nothing about the API leaks to a caller without a token;
3. refuses a body over the limit (413): at once when ``Content-Length`` says so, otherwise
   while counting the bytes of a chunked body as they arrive. The body (at most the limit)
   is then replayed to the application, which never sees more than the limit;
4. answers any exception the application did not handle with 500 ``internal`` and logs it
   (:func:`memdir.team.server.errors.log_fault`): never a traceback to the client.

Every refusal uses the one error shape of :mod:`memdir.team.server.errors`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from memdir.core.errors import MemdirError
from memdir.team.server.auth import token_matches
from memdir.team.server.errors import (
    PayloadTooLargeError,
    ServerFaultError,
    UnauthorizedError,
    error_body,
    log_fault,
    status_of,
)

__all__ = ["SECURITY_HEADERS", "Guard"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"content-security-policy", b"default-src 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)

# After refusing a body, read (and drop) up to this much more of it, so that a client still
# sending gets the 413 answer instead of a reset connection; beyond it, stop reading.
_DRAIN_LIMIT = 16 << 20


class _TooLargeError(Exception):
    pass


class Guard:
    """Wrap ``app``; ``token`` "" turns the token check off (``memdir serve --no-token``)."""

    def __init__(self, app: ASGIApp, *, token: str, max_body: int,
                 log_dir: Path | None) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body
        self.log_dir = log_dir

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def secured_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        path = scope.get("path", "")
        if self.token and (path == "/api" or path.startswith("/api/")) and \
                not token_matches(headers.get("authorization"), self.token):
            given = "authorization" in headers
            error = UnauthorizedError("wrong token" if given else "this route needs a token")
            await _send_error(secured_send, error, [(b"www-authenticate", b"Bearer")])
            return
        try:
            body = await self._read_body(headers, receive)
        except _TooLargeError:
            await _send_error(secured_send, PayloadTooLargeError(
                f"the request body is over the limit of {self.max_body} bytes"))
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            await self.app(scope, replay, secured_send)
        except Exception as exc:
            log_fault(self.log_dir, f"{scope.get('method', '?')} {path}", exc)
            if not started:
                await _send_error(secured_send, ServerFaultError(
                    f"internal error ({exc.__class__.__name__})",
                    f"This is a bug in memdir; the traceback is in "
                    f"{self.log_dir / 'server.log' if self.log_dir else 'the server log'}."))

    async def _read_body(self, headers: dict[str, str], receive: Receive) -> bytes:
        declared = headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > self.max_body:
            if int(declared) <= _DRAIN_LIMIT:
                await _drain(receive, _DRAIN_LIMIT)
            raise _TooLargeError
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await _drain(receive, _DRAIN_LIMIT - size, more=message.get("more_body", False))
                raise _TooLargeError
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


async def _drain(receive: Receive, budget: int, *, more: bool = True) -> None:
    while more and budget > 0:
        message = await receive()
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        more = message.get("more_body", False)


async def _send_error(send: Send, error: MemdirError,
                      headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(error_body(error.code, error.message, error.hint)).encode()
    await send({"type": "http.response.start", "status": status_of(error), "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
