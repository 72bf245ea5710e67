"""The one JSON error shape of the HTTP API, and how every failure is turned into it.

Every error answer, whatever raised it, is ``{"error": {"code", "message", "hint"}}``:

- a :class:`~memdir.core.errors.MemdirError` (from the store, or one of the server's own below)
  keeps its ``code`` and ``hint``; :data:`STATUS` maps the code to the HTTP status;
- FastAPI's request validation (wrong types, missing fields, malformed JSON) is 400
  ``bad_request`` naming the field;
- Starlette's HTTP exceptions (unknown route, wrong method) keep their status;
- anything else is 500 ``internal``: the traceback goes to ``$MEMDIR_HOME/logs/server.log``,
  never to the client (:func:`log_fault`).
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memdir.core.errors import MemdirError

__all__ = [
    "STATUS",
    "BadRequestError",
    "MethodNotAllowedError",
    "NotSupportedError",
    "PayloadTooLargeError",
    "RequestTimeoutError",
    "RouteNotFoundError",
    "ServerFaultError",
    "UnauthorizedError",
    "error_body",
    "install_handlers",
    "log_fault",
    "status_of",
]

API_HINT = "The fields and their types are in the OpenAPI schema at /openapi.json."


class BadRequestError(MemdirError):
    """A request the API cannot read: malformed JSON, wrong types, bad query values."""

    code = "bad_request"
    exit_code = 2
    default_hint = API_HINT


class UnauthorizedError(MemdirError):
    code = "unauthorized"
    default_hint = (
        "Send `Authorization: Bearer <token>`; `memdir serve --show-token` prints the token "
        "(it is kept in $MEMDIR_HOME/server.token)."
    )


class RouteNotFoundError(MemdirError):
    code = "not_found"
    exit_code = 3
    default_hint = "The routes are listed in the OpenAPI schema at /openapi.json."


class MethodNotAllowedError(MemdirError):
    code = "method_not_allowed"
    default_hint = "The methods each route accepts are in the OpenAPI schema at /openapi.json."


class PayloadTooLargeError(MemdirError):
    code = "payload_too_large"
    default_hint = (
        "Send a smaller body (split a long transcript), or start the server with a larger "
        "`memdir serve --max-body BYTES`."
    )


class NotSupportedError(MemdirError):
    """The store behind this server does not offer the operation."""

    code = "not_implemented"
    default_hint = (
        "This server's store cannot do that; run it against the Markdown + SQLite store "
        "(memdir serve without --database), or use the CLI on a machine with the files."
    )


class ServerFaultError(MemdirError):
    code = "internal"
    default_hint = "This is a bug in memdir: the details are in $MEMDIR_HOME/logs/server.log."


class RequestTimeoutError(MemdirError):
    """A request whose headers or body did not arrive in time (memdir.team.server.protocol)."""

    code = "request_timeout"
    default_hint = (
        "Send the whole request at once; on a slow link, start the server with a larger "
        "`memdir serve --request-timeout SECONDS`."
    )


# code -> HTTP status; a code not listed (a MemdirError the API does not expect) is a 500.
STATUS: Mapping[str, int] = {
    "bad_request": 400,
    "path_traversal": 400,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "duplicate": 409,
    "bad_memory_file": 409,
    "request_timeout": 408,
    "payload_too_large": 413,
    "invalid_memory": 422,
    "unknown_type": 422,
    "secret_detected": 422,
    "internal": 500,
    "not_implemented": 501,
    "llm_error": 502,
    "server_error": 502,
    "index_busy": 503,
    "database_error": 503,
}


def status_of(error: MemdirError) -> int:
    return STATUS.get(error.code, 500)


def error_body(code: str, message: str, hint: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "hint": hint}}


def _respond(error: MemdirError, status: int | None = None,
             headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(error.code, error.message, error.hint),
                        status_code=status or status_of(error), headers=dict(headers or {}))


def _field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    return ".".join(parts) if parts else "request"


def _validation_message(errors: Sequence[Any]) -> str:
    """One line naming each bad field: ``query.limit: Input should be ...``."""
    out = []
    for err in errors[:3]:
        if not isinstance(err, Mapping):
            out.append(str(err))
            continue
        if err.get("type") == "json_invalid":
            reason = (err.get("ctx") or {}).get("error", "invalid JSON")
            out.append(f"malformed JSON body: {reason}")
            continue
        out.append(f"{_field(err.get('loc', ()))}: {err.get('msg', 'invalid value')}")
    if len(errors) > 3:
        out.append(f"and {len(errors) - 3} more")
    return "; ".join(out) or "invalid request"


def log_fault(log_dir: Path | None, where: str, exc: BaseException) -> None:
    """Append the traceback of an unexpected exception to ``log_dir/server.log``; a failure
    to log is swallowed (the client still gets its 500)."""
    if log_dir is None:
        return
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    from memdir.core.errors import UnsafeFileError
    from memdir.core.safe_open import open_append

    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        # Never through a symlink, never waiting on a FIFO planted at the name.
        fd = open_append(log_dir / "server.log", mode=0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(f"{stamp} {where}\n{text}\n")
    except (OSError, UnsafeFileError):
        pass


def install_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error raised inside a route the one shape.
    (Failures outside the routes, and unexpected exceptions, are the guard's:
    :mod:`memdir.team.server.guard`.)"""

    async def memdir_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, MemdirError)
        headers = {"Retry-After": "1"} if status_of(exc) == 503 else None
        return _respond(exc, headers=headers)

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        message = _validation_message(exc.errors())
        kind = request.headers.get("content-type", "")
        if message.startswith("body") and "json" not in kind.lower():
            message += f" (the body was sent as {kind or 'no content type'}, not JSON)"
            return _respond(BadRequestError(message, "Send the body as JSON with "
                                                     "`Content-Type: application/json`."))
        return _respond(BadRequestError(message))

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        headers = exc.headers or {}
        where = f"{request.method} {request.url.path}"
        error: MemdirError
        if exc.status_code == 404:
            error = RouteNotFoundError(f"no route {where}")
        elif exc.status_code == 405:
            error = MethodNotAllowedError(f"method {request.method} is not allowed on "
                                          f"{request.url.path}")
        elif exc.status_code == 401:
            error = UnauthorizedError(str(exc.detail))
        elif exc.status_code == 413:
            error = PayloadTooLargeError(str(exc.detail))
        elif exc.status_code < 500:
            error = BadRequestError(str(exc.detail))
        else:
            error = ServerFaultError(str(exc.detail))
        return _respond(error, exc.status_code, headers)

    app.add_exception_handler(MemdirError, memdir_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
