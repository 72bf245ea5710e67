"""The HTTP API's routes (docs/api.md is the contract) and :func:`create_app`, which builds it.

Invariants:
- The app runs on any :class:`~memdir.core.memory_store.MemoryStore` (the Markdown + SQLite
  ``Memdir`` or the team server's ``PostgresStore``): routes call only the protocol, and reach
  for an optional method (``extract``, ``conflicts``, ``warm_vectors`` at start-up) through
  ``getattr``.
- Routes are sync functions: FastAPI runs them in its thread pool, each thread with its own
  store (:mod:`memdir.team.server.pool`), at most ``threads`` at once.
- Every answer is a value's ``to_dict()`` (plus the few keys the API adds: ``groups``,
  ``by_age``, ``conflicts``); every error is the one shape of :mod:`memdir.team.server.errors`.
- A memory's id comes from the URL only and is checked (:func:`check_ref`) before any store
  sees it; the store checks again (``safe_join``) for file names.
- Interactive docs are off (they load a CDN); the web page in ``static/`` is the UI.
"""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, FastAPI, Query, Security
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import HTTPBearer
from fastapi.staticfiles import StaticFiles

from memdir import __version__
from memdir.core.errors import InvalidMemoryError, PathTraversalError
from memdir.core.memory_store import MemoryStore
from memdir.core.model import Memory
from memdir.core.paths import unquote
from memdir.team.server import schemas as s
from memdir.team.server.errors import BadRequestError, NotSupportedError, install_handlers
from memdir.team.server.guard import Guard
from memdir.team.server.pool import StoreFactory, StorePool
from memdir.team.server.views import by_age, groups

__all__ = ["STATIC_DIR", "check_ref", "create_app"]

STATIC_DIR = Path(__file__).parent / "static"

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": s.ErrorOut, "description": text} for status, text in (
        (400, "bad request: malformed JSON, wrong field types, an id that leaves the store"),
        (401, "no token or a wrong one"),
        (404, "no such memory"),
        (409, "the memory's file is broken or the name is taken"),
        (413, "the body is over the limit"),
        (422, "the memory is refused: invalid, unknown type, or a secret in it"),
        (500, "a bug in memdir (logged on the server)"),
        (501, "the store behind this server cannot do this"),
        (502, "the LLM failed"),
        (503, "the index stayed locked, or the database is unreachable; retry"),
    )
}

ScopeQuery = Annotated[list[s.ScopeName] | None, Query(alias="scope",
                                                      description="only this scope (repeatable)")]
TypeQuery = Annotated[list[str] | None, Query(alias="type", description="only this type "
                                                                      "(repeatable)")]
TagQuery = Annotated[list[str] | None, Query(alias="tag", description="only memories with "
                                                                    "this tag (repeatable)")]
IdPath = Annotated[str, PathParam(description="the memory's id (or its file name)")]


def check_ref(ref: str) -> str:
    """A memory reference from a URL: one plain name. Anything that could be read as a path
    leaving the store (NUL, slash, backslash, '..', encoded or look-alike forms of them,
    control characters) is refused with PathTraversalError, whatever the store."""
    forms = {ref, unquote(ref), unquote(unquote(ref)), unicodedata.normalize("NFKC", ref)}
    for form in forms:
        if any(c in form for c in "/\\\x00") or form.strip() in (".", "..") or any(
                unicodedata.category(c) == "Cc" for c in form):
            raise PathTraversalError(f"not a memory id or file name: {ref!r}")
    return ref


def _memory(memory: Memory) -> dict[str, Any]:
    return memory.to_dict()


def _conflicts(store: MemoryStore, memory: Memory) -> list[dict[str, Any]]:
    find = getattr(store, "conflicts", None)
    if find is None:
        return []
    return [m.to_dict() for m in find(memory) if m.id != memory.id]


def _api(pool: StorePool) -> APIRouter:
    bearer = HTTPBearer(auto_error=False, description="the token of `memdir serve --show-token`")
    api = APIRouter(prefix="/api/memory", tags=["memory"], responses=_ERRORS,
                    dependencies=[Security(bearer)])  # documents the auth; the guard checks it

    @api.get("/search", response_model=s.HitsOut, summary="Full-text search")
    def search(
        q: Annotated[str, Query(min_length=1, description="what to look for (any text)")],
        limit: Annotated[int, Query(ge=1, le=100)] = 10,
        types: TypeQuery = None, scopes: ScopeQuery = None, tags: TagQuery = None,
        include_archived: Annotated[bool, Query(description="archived memories too")] = False,
    ) -> JSONResponse:
        hits = pool.get().search(q, limit=limit, types=types, scopes=scopes, tags=tags,
                                 include_archived=include_archived)
        return JSONResponse({"query": q, "hits": [h.to_dict() for h in hits]})

    @api.get("/context", response_model=s.ContextOut, summary="Session-start context")
    def context(
        query: Annotated[str | None, Query(description="the task at hand, to rank by")] = None,
        limit: Annotated[int, Query(ge=1, le=20, description="at most this many")] = 5,
        budget: Annotated[int, Query(ge=1, le=100_000, description="tokens")] = 800,
        fmt: Annotated[Literal["markdown", "prompt", "json", "snippets"],
                       Query(alias="format")] = "markdown",
        scopes: ScopeQuery = None,
    ) -> JSONResponse:
        result = pool.get().context(query, budget_tokens=budget, format=fmt, limit=limit,
                                    scopes=scopes)
        return JSONResponse({**result.to_dict(), "groups": groups(result.memories)})

    @api.post("/store", response_model=s.StoredOut, status_code=201, summary="Store a memory")
    def store(body: s.StoreBody) -> JSONResponse:
        db = pool.get()
        memory = db.store(body.content, type=body.type, scope=body.scope, name=body.name,
                          description=body.description, tags=body.tags, paths=body.paths,
                          relevance=body.relevance, meta=body.meta, context=body.context,
                          date=body.date)
        return JSONResponse({"memory": _memory(memory), "conflicts": _conflicts(db, memory)},
                            status_code=201)

    @api.post("/extract", response_model=s.ExtractOut, summary="Memories from a transcript")
    def extract(body: s.ExtractBody) -> JSONResponse:
        from memdir.capture.transcript import parse_text, parse_transcript

        if (body.transcript is None) == (body.messages is None):
            raise BadRequestError("give either 'transcript' or 'messages' (not both)",
                                  'e.g. {"transcript": "user: I prefer tabs"}')
        db = pool.get()
        run = getattr(db, "extract", None)
        if run is None:
            raise NotSupportedError("this server's store does not extract memories")
        try:
            parsed = (parse_text(body.transcript) if body.transcript is not None else
                      parse_transcript([m.model_dump() for m in body.messages or ()]))
        except InvalidMemoryError as exc:
            raise BadRequestError(exc.message, exc.hint) from None
        report = run(parsed, dry_run=body.dry_run, scope=body.scope,
                     session_id=body.session_id)
        return JSONResponse(report.to_dict())

    @api.get("/recall", response_model=s.RecallOut, summary="Memories for one prompt")
    def recall(
        prompt: Annotated[str, Query(description="the user's prompt")],
        session_id: Annotated[str, Query(min_length=1, description="the agent's session")],
        limit: Annotated[int, Query(ge=1, le=5)] = 5,
    ) -> JSONResponse:
        return JSONResponse(pool.get().recall(prompt, session_id, limit=limit).to_dict())

    @api.get("", response_model=s.MemoriesOut, summary="List memories")
    def list_memories(
        types: TypeQuery = None, scopes: ScopeQuery = None, tags: TagQuery = None,
        status: Literal["active", "archived", "all"] = "active",
        limit: Annotated[int | None, Query(ge=1, le=100_000)] = None,
        order: Literal["relevance", "recent", "updated"] = "relevance",
    ) -> JSONResponse:
        found = pool.get().list(types=types, scopes=scopes, tags=tags, status=status,
                                limit=limit, order=order)
        return JSONResponse({"memories": [_memory(m) for m in found]})

    @api.get("/stats", response_model=s.StatsOut, summary="Counts, and memories by age")
    def stats() -> JSONResponse:
        db = pool.get()
        data = db.stats().to_dict()
        data["by_age"] = by_age(db.list(status="all"))
        return JSONResponse(data)

    @api.get("/conflicts", response_model=s.ConflictsOut,
             summary="Memories that disagree (never merged by consolidation's rules)")
    def conflicts(scopes: ScopeQuery = None, types: TypeQuery = None,
                  limit: Annotated[int, Query(ge=1, le=500, description="at most this "
                                              "many")] = 20,
                  offset: Annotated[int, Query(ge=0, description="skip this many")] = 0,
                  ) -> JSONResponse:
        from memdir.upkeep.conflict_scan import scan

        db = pool.get()
        # A Memdir remembers its last whole-store scan in its home (PostgreSQL: no home).
        found = scan(getattr(db, "home", None), db.list(scopes=scopes, types=types))
        return JSONResponse({"total": len(found), "limit": limit, "offset": offset,
                             "conflicts": [c.to_dict() for c in found[offset:offset + limit]]})

    @api.get("/{id}", response_model=s.MemoryOut, summary="One memory (counts as an access)")
    def get(id: IdPath) -> JSONResponse:
        return JSONResponse({"memory": _memory(pool.get().get(check_ref(id)))})

    @api.patch("/{id}", response_model=s.StoredOut, summary="Change a memory")
    def patch(id: IdPath, body: Annotated[s.PatchBody, Body()]) -> JSONResponse:
        return JSONResponse(_patch(pool.get(), check_ref(id), body))

    @api.delete("/{id}", response_model=s.DeletedOut, summary="Delete a memory's file")
    def delete(id: IdPath) -> JSONResponse:
        return JSONResponse({"memory": _memory(pool.get().delete(check_ref(id))),
                             "deleted": True})

    @api.post("/{id}/archive", response_model=s.MemoryOut, summary="Archive a memory")
    def archive(id: IdPath) -> JSONResponse:
        return JSONResponse({"memory": _memory(pool.get().archive(check_ref(id)))})

    @api.post("/{id}/restore", response_model=s.MemoryOut, summary="Restore a memory")
    def restore(id: IdPath) -> JSONResponse:
        return JSONResponse({"memory": _memory(pool.get().restore(check_ref(id)))})

    return api


_FIELDS = ("content", "name", "description", "tags", "paths", "relevance", "meta")


def _patch(db: MemoryStore, ref: str, body: s.PatchBody) -> dict[str, Any]:
    """Apply a PATCH as up to three store calls: type (reclassify), fields (update), status
    (archive / restore). The likely refusals come before any write: an unknown type is the
    first call's, a secret in the new text is checked up front."""
    from memdir.core.safety import check_secrets, strip_private

    given: Mapping[str, Any] = body.model_dump(exclude_unset=True)
    changes = {k: v for k, v in given.items() if k in _FIELDS and v is not None}
    if not changes and body.type is None and body.status is None:
        raise BadRequestError("nothing to change",
                              f"give any of {', '.join(_FIELDS)}, type, status")
    check_secrets(strip_private(str(changes[k])) for k in ("content", "name", "description")
                  if k in changes)
    memory: Memory | None = None
    if body.type is not None:
        memory = db.reclassify(ref, body.type)
    if changes:
        memory = db.update(memory.id if memory else ref, **changes)
    if body.status is not None:
        target = memory.id if memory else ref
        memory = db.archive(target) if body.status == "archived" else db.restore(target)
    assert memory is not None
    return {"memory": _memory(memory), "conflicts": _conflicts(db, memory)}


def _page(app: FastAPI) -> None:
    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")


def _warm(store_factory: StoreFactory) -> None:
    """At start-up: a store that keeps vectors (``Memdir.warm_vectors``) loads the model in
    the background and starts embedding what lacks a vector; searches use FTS until the
    model is ready. A failure here is logged: the server starts anyway."""
    from memdir.core.errors import MemdirError, warn

    store = store_factory()
    try:
        warm = getattr(store, "warm_vectors", None)
        if warm is not None:
            warm()
    except MemdirError as exc:
        warn("memdir serve: semantic search not warmed: %s (hint: %s)", exc.message, exc.hint)
    finally:
        store.close()


def create_app(store_factory: StoreFactory, *, token: str, max_body: int = 1 << 20,
               kind: str = "sqlite", log_dir: Path | None = None,
               threads: int = 8) -> FastAPI:
    """The API and the web page over stores made by ``store_factory`` (one per thread).

    ``token`` "" turns authentication off (``memdir serve --no-token``); ``max_body`` caps
    request bodies (bytes); ``log_dir`` is where unexpected errors are logged; ``kind`` is
    what ``/healthz`` reports (sqlite or postgresql)."""
    pool = StorePool(store_factory)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        _warm(store_factory)
        try:
            yield
        finally:
            pool.close()

    app = FastAPI(title="memdir", version=__version__, docs_url=None, redoc_url=None,
                  lifespan=lifespan,
                  description="Memory that lasts for AI coding agents. Every /api route "
                              "needs `Authorization: Bearer <token>`; every error is "
                              '`{"error": {"code", "message", "hint"}}`.')
    install_handlers(app)

    @app.get("/healthz", response_model=s.HealthOut, tags=["server"],
             summary="Liveness (no token needed)")
    def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "store": kind, "version": __version__})

    app.include_router(_api(pool))
    _page(app)
    app.add_middleware(Guard, token=token, max_body=max_body, log_dir=log_dir)
    return app
