"""The HTTP/1.1 connection handler of ``memdir serve``: uvicorn's h11 protocol with two changes.

1. Every answer it writes itself is the API's one JSON error shape
   (:mod:`memdir.team.server.errors`), with the guard's security headers: a request h11 cannot
   parse (malformed request line, bad header, invalid HTTP) gets 400 ``bad_request`` instead
   of uvicorn's plain text.
2. A request must arrive whole within ``request_timeout`` seconds of its first byte (of the
   connection, for the first request): headers trickled a byte at a time, or a body that
   stops part way, no longer hold a connection (and a thread's worth of memory) forever. A
   request that started gets 408 ``request_timeout`` when no answer has begun, then the
   connection is closed; a connection idle before its first byte is closed silently (an
   answer nobody asked for could be read by a pooled client as the answer to its next
   request). Between requests uvicorn's own keep-alive timeout applies.

The timer is a deadline, not an idle timer: a byte now and then does not extend it. It runs
only while a request is being received; the application's own time is not bounded here.

Invariants: imported only when a server starts (it imports uvicorn and h11); it changes no
uvicorn behaviour besides the two above.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from memdir.team.server.errors import BadRequestError, RequestTimeoutError, error_body
from memdir.team.server.guard import SECURITY_HEADERS

__all__ = ["DEFAULT_REQUEST_TIMEOUT", "protocol_class"]

DEFAULT_REQUEST_TIMEOUT = 30.0
_PHRASES = {400: b"Bad Request", 408: b"Request Timeout"}


def json_answer(status: int, code: str, message: str, hint: str) -> bytes:
    """A complete HTTP/1.1 answer in the one error shape, closing the connection."""
    body = json.dumps(error_body(code, message, hint)).encode()
    head = [b"HTTP/1.1 %d %s" % (status, _PHRASES.get(status, b"Error")),
            b"content-type: application/json", b"content-length: %d" % len(body),
            b"connection: close", *(name + b": " + value for name, value in SECURITY_HEADERS)]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with JSON errors and a request deadline (module docstring)."""

    request_timeout: float = DEFAULT_REQUEST_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        self._watch()

    def send_400_response(self, msg: str) -> None:
        self._cancel_deadline()
        error = BadRequestError(
            "malformed HTTP request: the request line or a header could not be parsed",
            "Send a valid HTTP/1.1 request (method, path and version on the first line, then "
            "`Name: value` headers, each line ending in CRLF); any HTTP client library does.")
        self.transport.write(json_answer(400, error.code, error.message, error.hint))
        self.transport.close()

    # -- the request deadline ------------------------------------------------------------------

    def _receiving(self) -> bool:
        """Whether a request is being received (or awaited on a fresh connection)."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            return True
        # IDLE: before a request's headers are complete. Between requests, uvicorn's
        # keep-alive timer is armed and bounds the wait; its first byte disarms it.
        return state is h11.IDLE and self.timeout_keep_alive_task is None

    def _watch(self) -> None:
        if self.transport is None or self.transport.is_closing() or not self._receiving():
            self._cancel_deadline()
        elif self._deadline is None:
            self._deadline = self.loop.call_later(self.request_timeout, self._timed_out)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        started = state is h11.SEND_BODY or (state is h11.IDLE and bool(self.conn.trailing_data[0]))
        answering = state is h11.SEND_BODY and self.cycle is not None and \
            self.cycle.response_started
        if started and not answering:
            error = RequestTimeoutError(
                f"the request did not arrive whole within {self.request_timeout:g} seconds")
            self.transport.write(json_answer(408, error.code, error.message, error.hint))
        self.logger.warning("closed a connection whose request did not arrive within %gs",
                            self.request_timeout)
        self.transport.close()


def protocol_class(request_timeout: float) -> type[GuardedH11Protocol]:
    """The protocol class for uvicorn's ``http=`` setting, with this request deadline."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,),
                {"request_timeout": float(request_timeout)})
