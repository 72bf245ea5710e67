"""The team server as seen from a client: its settings and a small HTTP client for its API.

When ``MEMDIR_SERVER`` (a base URL) is set, or ``[server] url`` in the user's
``$MEMDIR_HOME/config.toml``, the team scope lives on that server (``memdir serve``,
docs/api.md) and this module talks to it. ``MEMDIR_TOKEN`` (or ``[server] token``) is sent as
``Authorization: Bearer``. ``MEMDIR_SERVER=off`` turns a configured server off.

Invariants:
- Only trusted settings choose the server: the environment and the config file in the home.
  A repository's ``.memdir/config.toml`` can never point team writes at a server (config.py
  reports such a setting as untrusted and ignores it).
- The standard library only, and ``urllib.request`` is imported on the first request: hooks
  start on every prompt and must stay light when no server is configured.
- Every failure is a :class:`~memdir.core.errors.MemdirError` with a hint: unreachable or
  unexpected answers are :class:`ServerError`; the API's error shape (``{"error": {code,
  message, hint}}``) comes back as the matching memdir error with the server's own message
  and hint. Redirects are not followed (the token must not travel to another host).
- What the server sends is untrusted: :func:`memory_from_api` validates every field and
  refuses ids that could not be a plain file name (the mirror then joins every name with
  :func:`memdir.core.paths.safe_join` on top).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from memdir.core.config import user_section
from memdir.core.errors import (
    ConfigError,
    IndexBusyError,
    InvalidMemoryError,
    MemdirError,
    MemoryNotFoundError,
    PathTraversalError,
    ServerError,
)
from memdir.core.model import (
    KNOWN_KEYS,
    RELEVANCE_WORDS,
    STATUSES,
    Memory,
    bound_context,
    parse_time,
)

if TYPE_CHECKING:
    import urllib.request

__all__ = ["PULL_TIMEOUT", "WRITE_TIMEOUT", "ServerClient", "ServerSettings",
           "memory_from_api", "server_settings"]

# Seconds. A pull runs inside hooks, which have about a second for it; a write is a command
# the user waits for.
PULL_TIMEOUT = 1.0
WRITE_TIMEOUT = 10.0
MAX_ANSWER = 64 * 1024 * 1024  # bytes: a hostile or broken server cannot exhaust memory
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_OFF = ("off", "none", "0", "false", "no")
_ERRORS: dict[str, type[MemdirError]] = {
    "not_found": MemoryNotFoundError, "path_traversal": PathTraversalError,
    "index_busy": IndexBusyError, "bad_request": InvalidMemoryError,
    "invalid_memory": InvalidMemoryError, "unknown_type": InvalidMemoryError,
    "secret_detected": InvalidMemoryError, "payload_too_large": InvalidMemoryError,
}


@dataclass(frozen=True)
class ServerSettings:
    url: str  # http(s)://host[:port][/prefix], no trailing slash
    token: str = ""
    timeout: float = PULL_TIMEOUT  # for pulls; writes wait WRITE_TIMEOUT

    @property
    def key(self) -> str:
        """host-port(-prefix) of the URL: the mirror's directory name (sanitised later)."""
        parts = urlsplit(self.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return f"{parts.hostname or 'server'}-{port}{parts.path}"


def server_settings(home: Path, env: Mapping[str, str] | None = None) -> ServerSettings | None:
    """The configured team server, or None: the environment over ``[server]`` in config.toml."""
    env = os.environ if env is None else env
    section, where = user_section(home, "server", 'url = "http://host:8765"')
    url = env.get("MEMDIR_SERVER", "").strip() or str(section.get("url") or "").strip()
    if not url or url.lower() in _OFF:
        return None
    try:
        usable = url.startswith(("http://", "https://")) and bool(urlsplit(url).hostname) \
            and urlsplit(url).port != 0
    except ValueError:  # a port that is not a number, or out of range
        usable = False
    if not usable:
        raise ConfigError(f"the team server URL {url!r} is not an http(s) URL",
                          "set MEMDIR_SERVER (or [server] url) to e.g. http://127.0.0.1:8765")
    token = env.get("MEMDIR_TOKEN", "").strip() or str(section.get("token") or "").strip()
    timeout = section.get("timeout", PULL_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(f"[server] timeout in {where} must be a number of seconds > 0",
                          "e.g. timeout = 1.5")
    return ServerSettings(url.rstrip("/"), token, float(timeout))


def _opener() -> urllib.request.OpenerDirector:
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # urllib then raises HTTPError for the 3xx itself

    return urllib.request.build_opener(NoRedirect)


class ServerClient:
    """The API of one team server (docs/api.md). Answers are JSON; memories are validated."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self._open: urllib.request.OpenerDirector | None = None

    def call(self, method: str, path: str, *, query: Mapping[str, str] | None = None,
             body: Mapping[str, Any] | None = None, timeout: float = WRITE_TIMEOUT) -> Any:
        """One request; the decoded JSON answer. MemdirError on any failure."""
        import http.client
        import urllib.error
        import urllib.request

        url = self.settings.url + path + (f"?{urlencode(query)}" if query else "")
        data = json.dumps(body, default=str).encode("utf-8") if body is not None else None
        headers = {"Accept": "application/json", "User-Agent": "memdir"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.settings.token:
            headers["Authorization"] = f"Bearer {self.settings.token}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        self._open = self._open or _opener()
        try:
            with self._open.open(request, timeout=timeout) as answer:
                raw = answer.read(MAX_ANSWER + 1)
        except urllib.error.HTTPError as exc:
            with exc:
                raise self._refused(exc.code, exc.read(MAX_ANSWER)) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(
                f"cannot reach the team server at {self.settings.url}: {reason}",
                f"is `memdir serve` running at {self.settings.url}? check MEMDIR_SERVER "
                "(or [server] url in $MEMDIR_HOME/config.toml); team memories are read from "
                "the local mirror meanwhile") from None
        if len(raw) > MAX_ANSWER:
            raise ServerError(f"the team server's answer to {method} {path} is over "
                              f"{MAX_ANSWER} bytes", "check that MEMDIR_SERVER is a memdir server")
        try:
            return json.loads(raw)
        except ValueError:
            raise ServerError(f"the team server's answer to {method} {path} is not JSON",
                              "check that MEMDIR_SERVER points at `memdir serve`") from None

    def _refused(self, status: int, raw: bytes) -> MemdirError:
        if status == 401:
            return ServerError(
                f"the team server at {self.settings.url} refused the token (401 unauthorized)",
                "check MEMDIR_TOKEN (or [server] token); `memdir serve --show-token` on the "
                "server prints it")
        try:
            error = json.loads(raw)["error"]
            code, message, hint = str(error["code"]), str(error["message"]), str(error["hint"])
        except (ValueError, KeyError, TypeError):
            return ServerError(f"the team server at {self.settings.url} answered HTTP {status}",
                               "check that MEMDIR_SERVER points at `memdir serve`; its log "
                               "says more")
        exc = _ERRORS.get(code, ServerError)(f"team server: {message}", hint)
        exc.code = code  # the API's code, whatever class carries it here
        return exc

    # -- the endpoints -----------------------------------------------------------------------

    def health(self, timeout: float = WRITE_TIMEOUT) -> dict[str, Any]:
        answer = self.call("GET", "/healthz", timeout=timeout)
        return answer if isinstance(answer, dict) else {}

    def list_team(self, timeout: float = WRITE_TIMEOUT) -> list[Any]:
        """Every team memory, active and archived, as the server sent them (unvalidated)."""
        answer = self.call("GET", "/api/memory", query={"scope": "team", "status": "all"},
                           timeout=timeout)
        items = answer.get("memories") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            raise ServerError("the team server's memory list has no 'memories' array",
                              "check that MEMDIR_SERVER points at `memdir serve`")
        return items

    def store(self, fields: Mapping[str, Any]) -> tuple[Memory, list[Memory]]:
        """POST a new team memory; the stored (or reinforced) one and its conflicts."""
        answer = self.call("POST", "/api/memory/store", body={**fields, "scope": "team"})
        conflicts = answer.get("conflicts") if isinstance(answer, dict) else None
        return _memory_of(answer), [memory_from_api(c) for c in conflicts or []
                                    if isinstance(c, dict)]

    def get(self, ref: str) -> Memory:
        return _memory_of(self.call("GET", f"/api/memory/{_ref(ref)}"))

    def update(self, ref: str, fields: Mapping[str, Any]) -> Memory:
        return _memory_of(self.call("PATCH", f"/api/memory/{_ref(ref)}", body=dict(fields)))

    def action(self, ref: str, verb: str) -> Memory:
        """``archive`` or ``restore`` a memory."""
        return _memory_of(self.call("POST", f"/api/memory/{_ref(ref)}/{verb}"))

    def delete(self, ref: str) -> Memory:
        return _memory_of(self.call("DELETE", f"/api/memory/{_ref(ref)}"))


def _ref(ref: str) -> str:
    return quote(ref, safe="")


def _memory_of(answer: Any) -> Memory:
    item = answer.get("memory") if isinstance(answer, dict) else None
    if not isinstance(item, dict):
        raise ServerError("the team server's answer has no 'memory' object",
                          "check that MEMDIR_SERVER points at `memdir serve`")
    return memory_from_api(item)


def _text(item: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = item.get(key, default)
    if not isinstance(value, str):
        raise InvalidMemoryError(f"the team server sent a memory whose {key!r} is not text")
    return value


def _strings(item: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = item.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidMemoryError(f"the team server sent a memory whose {key!r} is not a list "
                                 "of strings")
    return tuple(value)


def memory_from_api(item: Mapping[str, Any]) -> Memory:
    """A team memory from the API's ``Memory.to_dict()`` shape, every field checked. Its
    ``path`` is unset: where it lives locally is the mirror's decision, never the server's."""
    mid = _text(item, "id")
    if not _ID.match(mid):
        raise PathTraversalError(f"the team server sent an unusable memory id {mid!r}",
                                 "ids must be plain names (letters, digits, '.', '_', '-')")
    relevance = item.get("relevance", 0.9)
    if isinstance(relevance, str):
        relevance = RELEVANCE_WORDS.get(relevance, -1.0)
    if isinstance(relevance, bool) or not isinstance(relevance, int | float) \
            or not 0.0 <= relevance <= 1.0:
        raise InvalidMemoryError(f"memory {mid}: relevance {relevance!r} is not 0.0-1.0")
    reinforced = item.get("reinforced", 0)
    if isinstance(reinforced, bool) or not isinstance(reinforced, int) or reinforced < 0:
        raise InvalidMemoryError(f"memory {mid}: reinforced {reinforced!r} is not a count")
    status = _text(item, "status", "active")
    if status not in STATUSES:
        raise InvalidMemoryError(f"memory {mid}: unknown status {status!r}")
    meta = item.get("meta") or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and k for k in meta):
        raise InvalidMemoryError(f"memory {mid}: 'meta' is not an object")
    meta = {k: v for k, v in meta.items() if k not in KNOWN_KEYS}  # a key may not pose as one
    created = parse_time(item.get("created"))
    updated = parse_time(item.get("updated")) or created
    if created is None or updated is None:
        raise InvalidMemoryError(f"memory {mid}: 'created' is not a timestamp")
    superseded = item.get("superseded_by")
    body = _text(item, "content").strip()
    kind = _text(item, "type").strip().lower()
    if not body or not kind:
        raise InvalidMemoryError(f"memory {mid}: no content or no type")
    name = " ".join(_text(item, "name", "").split()) or mid
    return Memory(
        id=mid, name=name, description=" ".join(_text(item, "description", "").split()) or name,
        type=kind, body=body, scope="team", relevance=float(relevance),
        tags=_strings(item, "tags"), paths=_strings(item, "paths"),
        source=_text(item, "source", "manual"), created=created, updated=updated,
        reinforced=reinforced, status=status,
        superseded_by=superseded if isinstance(superseded, str) and superseded else None,
        meta=meta, context=bound_context(_text(item, "context", "")), date=_day(item, mid))


def _day(item: Mapping[str, Any], mid: str) -> dt.date | None:
    value = item.get("date")
    if value is None or value == "":
        return None
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise InvalidMemoryError(f"memory {mid}: 'date' {value!r} is not a day") from None
