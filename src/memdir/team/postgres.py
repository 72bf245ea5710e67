"""PostgresStore: the team server's store, one PostgreSQL schema behind the MemoryStore protocol.

It keeps the invariants of :mod:`memdir.core.memory_store` with the database as the only state,
so any number of server processes and threads may share one schema:

- Every write is built by :func:`memdir.core.draft.draft` / :func:`memdir.core.draft.revise` against
  the store's taxonomy, exactly as the Markdown store does (secrets refused, ``<private>``
  stripped, relative dates made absolute, unknown types listing the valid ones).
- Exact duplicates: the unique index on (scope, norm_hash), with
  :func:`memdir.core.store.norm_hash` so both stores agree on what a duplicate is, and
  ``INSERT ... ON CONFLICT DO UPDATE SET reinforced = reinforced + 1`` make two writers of
  the same content, in any processes, end with one row.
- Usage counters live in the ``memories`` row: ``access_count`` (shown) and ``used_count``
  (sessions whose agent drew on it). Accesses are counted after the read, in their own
  short transaction (``lock_timeout``), and a failure is logged, never raised.
- Recall claims a memory for a session with ``INSERT ... ON CONFLICT DO NOTHING RETURNING``
  while holding the session's row lock, so two processes never surface the same memory twice
  in one session nor overrun its byte budget.
- Search turns any input into a tsquery (any input is safe) and scores its matches on the
  scale of :mod:`memdir.retrieval.scale` (word evidence and strength,
  :mod:`memdir.team.postgres_search`). Where the ``embed`` extra is there (and ``semantic`` is not
  off), a background worker of the process embeds what was written (pgvector's table, or plain
  float32 bytes without it) and search fuses the words' ranking with the nearest by meaning
  (:mod:`memdir.team.postgres_vectors`); no write waits for the model.
- One connection per thread; database failures become :class:`memdir.core.errors.DatabaseError`
  with a hint, never a driver exception (:mod:`memdir.team.postgres_conn`).

Memories here have no file: ``Memory.path`` is None. The schema is in
:mod:`memdir.team.postgres_schema`; context and recall in :mod:`memdir.team.postgres_recall`.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import psycopg

from memdir.core.dates import anchor_day
from memdir.core.draft import draft, relevance_of, revise
from memdir.core.errors import (
    DatabaseError,
    DuplicateNameError,
    InvalidMemoryError,
    MemoryNotFoundError,
)
from memdir.core.files import new_id
from memdir.core.model import SCOPES, STATUSES, Hit, Memory, Scope, Stats, now
from memdir.core.store import norm_hash
from memdir.core.taxonomy import get_taxonomy
from memdir.team.postgres_conn import (
    COLUMNS,
    WRITTEN,
    Conn,
    Connections,
    memory_from_row,
    redact,
    row_values,
)
from memdir.team.postgres_schema import migrate
from memdir.team.postgres_search import search, where_clause
from memdir.team.postgres_vectors import Embeddings

if TYPE_CHECKING:
    from psycopg.rows import DictRow

    from memdir.capture.extract import ExtractReport
    from memdir.capture.transcript import Transcript
    from memdir.retrieval.context_format import Context
    from memdir.retrieval.embed import Embedder
    from memdir.retrieval.recall import Recall

__all__ = ["PostgresStore", "redact"]

log = logging.getLogger("memdir")

TOUCH_LOCK_TIMEOUT = "200ms"  # a read waits this long at most for its usage counters
_CASTS = {"tags": "::text[]", "paths": "::text[]", "meta": "::jsonb"}
_VALUES = [f"%s{_CASTS.get(c, '')}" for c in WRITTEN]
_INSERT = f"INSERT INTO memories AS m ({', '.join(WRITTEN)}) VALUES ({', '.join(_VALUES)})"
# The same content again: one more reinforcement, the union of the tags, the higher relevance,
# back to active, the first search context and date kept (given now when there was none):
# what the Markdown store does to the file of a duplicate.
_REINFORCE = (
    " ON CONFLICT (scope, norm_hash) DO UPDATE SET reinforced = m.reinforced + 1, "
    "updated = EXCLUDED.updated, status = 'active', relevance = GREATEST(m.relevance, "
    "EXCLUDED.relevance), tags = m.tags || ARRAY(SELECT t FROM unnest(EXCLUDED.tags) WITH "
    "ORDINALITY AS x(t, n) WHERE NOT t = ANY(m.tags) ORDER BY n), "
    "context = CASE WHEN m.context = '' THEN EXCLUDED.context ELSE m.context END, "
    "date = COALESCE(m.date, EXCLUDED.date)")
_UPDATE = (f"UPDATE memories SET ({', '.join(WRITTEN[1:])}) = ({', '.join(_VALUES[1:])}) "
           f"WHERE id = %s RETURNING {COLUMNS}")


class PostgresStore:
    """Memories in one schema of a PostgreSQL database (see the module docstring)."""

    kind = "postgresql"

    def __init__(self, dsn: str, *, schema: str = "memdir", taxonomy: str = "memdir",
                 clock: Callable[[], datetime] | None = None,
                 semantic: bool | None = None, embedder: Embedder | None = None) -> None:
        if not isinstance(schema, str) or not schema or "\x00" in schema:
            raise InvalidMemoryError(f"invalid schema name {schema!r}", "use e.g. memdir")
        self.dsn, self.schema = dsn, schema
        self.taxonomy = get_taxonomy(taxonomy)
        self.clock = clock or now
        self.connections = Connections(dsn, schema)
        with self.connections.db() as conn:
            pgvector = migrate(conn, schema)
        self.vectors = pgvector is not None  # pgvector there: the embeddings table made
        self.embeddings = Embeddings(self.connections, pgvector, semantic, embedder)

    @property
    def semantic(self) -> bool:
        """Whether memories get vectors and searches rank by meaning as well as words."""
        return self.embeddings.on

    def embed_memories(self) -> int:
        """Embed every memory that lacks a vector now, waiting for it (the background worker
        does it otherwise); how many. 0 when vectors are off."""
        return self.embeddings.embed_memories()

    def close(self) -> None:
        self.embeddings.close()
        self.connections.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------

    def _draft(self, content: str, scope: Scope, **fields: Any) -> Memory:
        if scope not in SCOPES:
            raise InvalidMemoryError(f"unknown scope {scope!r}", "use user, project or team")
        stamp = self.clock()
        return draft(content, scope=scope, taxonomy=self.taxonomy, now=stamp,
                     anchor=anchor_day(stamp), **fields)

    def _insert(self, conn: Conn, memory: Memory, tail: str) -> DictRow | None:
        """One INSERT (``tail``: what to do on a conflict); a fresh id if the given is taken."""
        while True:
            placed = memory if memory.id else memory.replace(id=new_id())
            try:
                with conn.transaction():  # a savepoint: an id collision spoils nothing else
                    return conn.execute(f"{_INSERT}{tail} RETURNING {COLUMNS}",
                                        row_values(placed)).fetchone()
            except psycopg.errors.UniqueViolation as exc:
                if exc.diag.constraint_name != "memories_pkey" or memory.id:
                    raise
                log.debug("memdir: id %s taken, drawing another", placed.id)

    def store(self, content: str, *, type: str, scope: Scope = "project",
              name: str | None = None, description: str | None = None,
              tags: Iterable[str] = (), paths: Iterable[str] = (),
              relevance: float | str | None = None, meta: Mapping[str, Any] | None = None,
              source: str = "manual", context: str | None = None,
              date: date | datetime | str | None = None) -> Memory:
        """Store one memory; an exact duplicate (same scope) reinforces the existing one."""
        return self.store_many([{"content": content, "type": type, "scope": scope,
                                 "name": name, "description": description, "tags": tags,
                                 "paths": paths, "relevance": relevance, "meta": meta,
                                 "source": source, "context": context, "date": date}])[0]

    def store_many(self, items: Iterable[Mapping[str, Any]]) -> builtins.list[Memory]:
        """Store many memories in one transaction; all are validated before any is written."""
        drafts = []
        for n, item in enumerate(items):
            fields = dict(item)
            if "content" not in fields or "type" not in fields:
                raise InvalidMemoryError(f"item {n} needs 'content' and 'type'",
                                         "give each item at least content and type")
            try:
                drafts.append(self._draft(fields.pop("content"), fields.pop("scope", "project"),
                                          **fields))
            except TypeError as exc:
                raise InvalidMemoryError(f"item {n}: {exc}", "use store()'s arguments") from None
        with self.connections.db() as conn, conn.transaction():
            rows = [self._insert(conn, memory, _REINFORCE) for memory in drafts]
            # A duplicate within the batch: every mention returns the memory as last stored.
            latest = {r["id"]: memory_from_row(r) for r in rows if r is not None}
        self.embeddings.wrote()
        return [latest[r["id"]] for r in rows if r is not None]

    def put(self, memories: Iterable[Memory]) -> tuple[builtins.list[Memory],
                                                       builtins.list[tuple[Memory, str]]]:
        """Write memories as they are (ids, timestamps, counters: an import), in one
        transaction. They must come from :func:`memdir.core.draft.draft`. A memory whose id or
        content (in its scope) is already stored is skipped. Returns (written, skipped with
        why)."""
        written: list[Memory] = []
        skipped: list[tuple[Memory, str]] = []
        memories = builtins.list(memories)
        with self.connections.db() as conn, conn.transaction():
            for memory in memories:
                if memory.scope not in SCOPES or memory.status not in STATUSES:
                    raise InvalidMemoryError(f"memory {memory.id!r}: bad scope or status")
                typed = memory.replace(type=self.taxonomy.resolve(memory.type))
                row = self._insert(conn, typed, " ON CONFLICT DO NOTHING")
                if row is not None:
                    written.append(memory_from_row(row))
                elif memory.id and conn.execute("SELECT 1 FROM memories WHERE id = %s",
                                                (memory.id,)).fetchone():
                    skipped.append((memory, f"id {memory.id} already exists"))
                else:
                    skipped.append((memory, "same content already stored"))
        if written:
            self.embeddings.wrote()
        return written, skipped

    def _modify(self, ref: str, change: Callable[[Memory], Memory]) -> Memory:
        """Change one memory under its row lock."""
        with self.connections.db() as conn, conn.transaction():
            current = self._row(conn, ref, "FOR UPDATE")
            updated = change(current)
            try:
                with conn.transaction():
                    row = conn.execute(_UPDATE, (*row_values(updated)[1:], current.id)).fetchone()
            except psycopg.errors.UniqueViolation:  # new content that another memory has
                other = conn.execute(
                    "SELECT id FROM memories WHERE scope = %s AND norm_hash = %s",
                    (updated.scope, norm_hash(updated.body))).fetchone()
                which = other["id"] if other else "?"
                raise DuplicateNameError(
                    f"memory {which} already has this content in scope {updated.scope}",
                    f"update or archive memory {which} instead, or change the content"
                ) from None
            assert row is not None
            changed = memory_from_row(row)
        if (changed.name, changed.description, changed.body) != (
                current.name, current.description, current.body):
            self.embeddings.wrote()  # the trigger dropped its vector: a new one is due
        return changed

    def update(self, ref: str, *, content: str | None = None, name: str | None = None,
               description: str | None = None, tags: Iterable[str] | None = None,
               paths: Iterable[str] | None = None, relevance: float | str | None = None,
               meta: Mapping[str, Any] | None = None, reinforce: bool = False) -> Memory:
        stamp = self.clock()
        return self._modify(ref, lambda current: revise(
            current, taxonomy=self.taxonomy, now=stamp, content=content, name=name,
            description=description, tags=tags, paths=paths, relevance=relevance, meta=meta,
            reinforce=reinforce))

    def reclassify(self, ref: str, type: str) -> Memory:
        canonical = self.taxonomy.resolve(type)
        stamp = self.clock()
        return self._modify(ref, lambda m: m.replace(
            type=canonical, updated=stamp,
            relevance=relevance_of(m.relevance, self.taxonomy, canonical)))

    def archive(self, ref: str) -> Memory:
        """Archive: still searchable with ``include_archived``, never injected."""
        return self._modify(ref, lambda m: m.replace(status="archived", updated=self.clock()))

    def restore(self, ref: str) -> Memory:
        return self._modify(ref, lambda m: m.replace(status="active", updated=self.clock()))

    def delete(self, ref: str) -> Memory:
        with self.connections.db() as conn, conn.transaction():
            memory = self._row(conn, ref, "FOR UPDATE")
            conn.execute("DELETE FROM memories WHERE id = %s", (memory.id,))
        return memory

    # -- reading -------------------------------------------------------------------------------

    def _row(self, conn: Conn, ref: str, lock: str = "") -> Memory:
        if not isinstance(ref, str) or not ref.strip() or "\x00" in ref:
            raise MemoryNotFoundError("no memory id given" if not ref else
                                      f"no memory with id {ref!r}")
        row = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id = %s {lock}",
                           (ref.strip(),)).fetchone()
        if row is None:
            raise MemoryNotFoundError(f"no memory with id {ref!r}")
        return memory_from_row(row)

    def touch(self, memories: Iterable[Memory]) -> bool:
        """Count one access of each memory. Never raises: usage must not fail a read."""
        ids = sorted({m.id for m in memories})
        if not ids:
            return True
        try:
            with self.connections.db() as conn, conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = '{TOUCH_LOCK_TIMEOUT}'")
                # Rows locked in id order: concurrent touches queue instead of deadlocking.
                conn.execute(
                    "UPDATE memories SET access_count = access_count + 1, last_accessed = %s "
                    "FROM (SELECT id FROM memories WHERE id = ANY(%s::text[]) ORDER BY id "
                    "FOR UPDATE) AS locked WHERE memories.id = locked.id", (self.clock(), ids))
            return True
        except DatabaseError as exc:
            log.warning("memdir: usage counters not updated (%s); the read succeeded",
                        exc.message)
            return False

    def get(self, ref: str) -> Memory:
        """A memory by id (MemoryNotFoundError if none). Counts as an access."""
        with self.connections.db() as conn:
            memory = self._row(conn, ref)
        self.touch([memory])
        return memory.replace(access_count=memory.access_count + 1,
                              last_accessed=self.clock())

    def where_clause(self, types: Sequence[str] | None, scopes: Sequence[Scope] | None,
                     tags: Sequence[str] | None, status: str) -> tuple[str, builtins.list[Any]]:
        """The SQL condition and parameters of the filters (types resolved, unknown refused)."""
        return where_clause(self.taxonomy, types, scopes, tags, status)

    def search(self, query: str, *, limit: int = 10, types: Sequence[str] | None = None,
               scopes: Sequence[Scope] | None = None, tags: Sequence[str] | None = None,
               include_archived: bool = False, touch: bool = True,
               dates: bool = True) -> builtins.list[Hit]:
        """Full-text search (stemmed, any input safe), ranked by score; with vectors on,
        fused with the nearest by meaning (:mod:`memdir.team.postgres_search`). ``dates=False``:
        a memory's days as words are no evidence on their own (recall)."""
        hits = search(self, query, limit=limit, types=types, scopes=scopes, tags=tags,
                      include_archived=include_archived, dates=dates)
        if touch:
            self.touch(h.memory for h in hits)
        return hits

    def conflicts(self, memory: Memory) -> builtins.list[Memory]:
        """The active memories ``memory`` contradicts, among its best full-text matches
        (:func:`memdir.team.ops.conflicts` is the same for the SQLite store)."""
        from memdir.team.ops import NEIGHBOURS
        from memdir.upkeep.conflicts import claim_of, find_conflicts

        hits = self.search(claim_of(memory.body)[:2000], limit=NEIGHBOURS, touch=False,
                           dates=False)
        return find_conflicts(memory, [h.memory for h in hits])

    def list(self, *, types: Sequence[str] | None = None, scopes: Sequence[Scope] | None = None,
             tags: Sequence[str] | None = None, status: str = "active",
             limit: int | None = None, order: str = "relevance") -> builtins.list[Memory]:
        """Memories matching the filters; ``order`` relevance (then newest created first),
        recent (newest created first, as the SQLite store), updated (last changed first) or
        name."""
        orders = {"relevance": "relevance DESC, created DESC", "recent": "created DESC, "
                  "updated DESC", "updated": "updated DESC", "name": "name"}
        if order not in orders:
            raise InvalidMemoryError(f"unknown order {order!r}", f"use one of {', '.join(orders)}")
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidMemoryError(f"limit must be a count, not {limit!r}")
        where, params = self.where_clause(types, scopes, tags, status)
        with self.connections.db() as conn:
            rows = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE {where} "
                                f"ORDER BY {orders[order]}, id LIMIT %s",
                                [*params, limit]).fetchall()
        return [memory_from_row(r) for r in rows]

    def context(self, query: str | None = None, *, budget_tokens: int = 800,
                format: str = "markdown", limit: int | None = None,
                scopes: Sequence[Scope] | None = None) -> Context:
        """Seed 000's injection: active memories by relevance then newest (with a query,
        those matching it first), the top ``limit`` (5; at most 20) that fit
        ``budget_tokens`` (a hard cap), grouped by type. Counts an access of each."""
        from memdir.team.postgres_recall import build_context

        return build_context(self, query, budget_tokens=budget_tokens, fmt=format,
                             limit=limit, scopes=scopes)

    def recall(self, prompt: str, session_id: str, *, limit: int = 5) -> Recall:
        """Up to ``limit`` (max 5) memories for a prompt, none already surfaced in the
        session (seed 001's rules, as :mod:`memdir.retrieval.recall` keeps them), by ranked
        search."""
        from memdir.team.postgres_recall import recall

        return recall(self, prompt, session_id, limit=limit)

    def extract(self, transcript: Transcript, *, scope: Scope = "project", dry_run: bool = False,
                session_id: str | None = None) -> ExtractReport:
        """Rule extraction from a parsed transcript
        (:func:`memdir.capture.extract.extract_into`)."""
        from memdir.capture.extract import extract_into

        return extract_into(self, transcript, taxonomy=self.taxonomy, scope=scope,
                            session_id=session_id or transcript.session_id, dry_run=dry_run)

    def record_uses(self, session_id: str, transcript: Transcript) -> int:
        """Count as used (once per session) each memory recalled into the session that the
        agent's later words or tool calls in ``transcript`` draw on (:mod:`memdir.capture.uses`)."""
        from memdir.team.postgres_recall import record_uses

        return record_uses(self, session_id, transcript)

    def stats(self) -> Stats:
        from memdir.team.postgres_stats import stats

        return stats(self)
