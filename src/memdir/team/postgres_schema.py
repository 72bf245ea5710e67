"""The PostgreSQL store's schema: named, ordered migrations and the optional vector part.

Invariants:
- Everything lives in one schema (``memdir`` by default; tests use a fresh one each), so
  several stores can share a database. Connections set ``search_path`` to that schema and
  every statement here is unqualified.
- :func:`migrate` runs inside one transaction holding ``pg_advisory_xact_lock`` on a key
  derived from the schema name: server processes starting at once queue on the lock, the
  first applies what is missing, the others find it recorded in ``schema_migrations`` and
  apply nothing. A failed migration rolls back whole.
- Migrations are append-only: a released one is never edited, a change is a new entry.
- ``memories.search`` is a weighted ``tsvector`` kept by a trigger (``array_to_string`` is
  not immutable, so a generated column cannot use it): name A, description and tags B, body
  C, paths, search context and the days of ``created`` and ``date`` as words D (as
  :func:`memdir.core.model.date_words` writes them), English stemming, so "deploy" finds
  "Deployments".
- One row per (scope, content): the unique index ``memories_content`` on
  (scope, norm_hash) is what lets concurrent writers of the same text end up with one row.
- ``plain_vectors`` (migration 3) holds the vectors where pgvector is missing: float32
  little-endian bytes (:func:`memdir.retrieval.embed.to_blob`), one row per memory (deleted with
  it), ``seq`` drawn anew at every write of a row so a reader refreshes by what is newer
  (:mod:`memdir.team.postgres_plain_vectors`). Its trigger ``plain_vectors_stale`` deletes a vector
  in the statement that changes the memory's name, description or body, as below.
- The ``embeddings`` table exists only where the ``vector`` extension (pgvector) can be
  created (or already is, in any schema). It is not a numbered migration: a database that
  gains pgvector later gets the table at the next start. One row per memory (deleted with
  it), written by :mod:`memdir.team.postgres_vectors`; a row is never stale: the trigger
  ``embeddings_stale`` deletes it in the same statement that changes the memory's name,
  description or body, whoever the writer (a store with vectors off, psql), so the next
  search fills it again. With pgvector >= 0.5 an HNSW index (cosine) covers the vectors of
  :data:`memdir.retrieval.embed.DIM` dimensions; older versions scan exactly (an ivfflat index built
  over an empty table would cluster nothing and lose recall).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from memdir.core.errors import warn
from memdir.retrieval.embed import DIM

__all__ = ["MIGRATIONS", "Pgvector", "migrate"]


def _rehash(conn: psycopg.Connection[Any]) -> None:
    """Migration 5: norm_hash recomputed with :func:`memdir.core.store.norm_hash` (exact duplicates
    ignore trailing sentence punctuation and surrounding quotes), and with it the norm_hash of
    vectors made from the same text, so they stay fresh. Two rows of one scope that now
    normalise alike (``x.`` and ``x``) would break the unique index ``memories_content``:
    both are kept, the one the new hash would collide with keeps its old hash (a later store
    of that text reinforces the other)."""
    from memdir.core.store import norm_hash

    cur = conn.cursor(row_factory=tuple_row)
    rows = cur.execute("SELECT id, scope, norm_hash, body FROM memories "
                       "ORDER BY created, id").fetchall()
    taken = {(scope, digest) for _, scope, digest, _ in rows}
    changes: list[tuple[str, str, str]] = []
    for id_, scope, digest, body in rows:
        new = norm_hash(body)
        if new != digest and (scope, new) not in taken:
            taken.discard((scope, digest))
            taken.add((scope, new))
            changes.append((new, id_, digest))
    vectors = [t for t in ("embeddings", "plain_vectors")
               if cur.execute("SELECT to_regclass(%s)", (t,)).fetchone() != (None,)]
    for table in vectors:  # before the memories: their old hash says which are fresh
        cur.executemany(sql.SQL("UPDATE {} SET norm_hash = %s WHERE id = %s AND norm_hash = %s")
                        .format(sql.Identifier(table)), changes)
    cur.executemany("UPDATE memories SET norm_hash = %s WHERE id = %s AND norm_hash = %s",
                    changes)


Migration = tuple[str, "str | Callable[[psycopg.Connection[Any]], None]"]
MIGRATIONS: tuple[Migration, ...] = (
    (
        "memories with a weighted tsvector, usage counters and one row per content per scope",
        """
        CREATE TABLE memories (
            id text PRIMARY KEY,
            name text NOT NULL,
            description text NOT NULL,
            type text NOT NULL,
            body text NOT NULL,
            scope text NOT NULL CHECK (scope IN ('user', 'project', 'team')),
            relevance double precision NOT NULL CHECK (relevance BETWEEN 0 AND 1),
            tags text[] NOT NULL DEFAULT '{}',
            paths text[] NOT NULL DEFAULT '{}',
            source text NOT NULL,
            created timestamptz NOT NULL,
            updated timestamptz NOT NULL,
            reinforced integer NOT NULL DEFAULT 0,
            status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
            superseded_by text,
            meta jsonb NOT NULL DEFAULT '{}',
            access_count integer NOT NULL DEFAULT 0,
            last_accessed timestamptz,
            norm_hash text NOT NULL,
            search tsvector NOT NULL DEFAULT ''
        );
        CREATE UNIQUE INDEX memories_content ON memories (scope, norm_hash);
        CREATE INDEX memories_search ON memories USING gin (search);
        CREATE INDEX memories_tags ON memories USING gin (tags);
        CREATE INDEX memories_listing ON memories (status, relevance DESC, created DESC);
        CREATE INDEX memories_recent ON memories (updated DESC);
        CREATE INDEX memories_created ON memories (created DESC);
        CREATE FUNCTION memories_search_vector() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.search :=
                setweight(to_tsvector('english', NEW.name), 'A') ||
                setweight(to_tsvector('english', NEW.description || ' ' ||
                                      array_to_string(NEW.tags, ' ')), 'B') ||
                setweight(to_tsvector('english', NEW.body), 'C') ||
                setweight(to_tsvector('english', array_to_string(NEW.paths, ' ')), 'D');
            RETURN NEW;
        END $$;
        CREATE TRIGGER memories_search_vector
            BEFORE INSERT OR UPDATE OF name, description, tags, body, paths ON memories
            FOR EACH ROW EXECUTE FUNCTION memories_search_vector();
        """,
    ),
    (
        "per-session recall state: bytes used and the memories already surfaced",
        """
        CREATE TABLE recall_sessions (
            session_id text PRIMARY KEY,
            bytes integer NOT NULL DEFAULT 0,
            recalls integer NOT NULL DEFAULT 0,
            started timestamptz NOT NULL,
            updated timestamptz NOT NULL
        );
        CREATE TABLE recall_surfaced (
            session_id text NOT NULL REFERENCES recall_sessions ON DELETE CASCADE,
            id text NOT NULL REFERENCES memories ON DELETE CASCADE,
            surfaced timestamptz NOT NULL,
            PRIMARY KEY (session_id, id)
        );
        """,
    ),
    (
        "vectors without pgvector: float32 bytes per memory, numbered for incremental reads",
        # The stale trigger names the table through TG_TABLE_SCHEMA: a writer (psql) may run
        # with another search_path, and this text is the same for every schema.
        """
        CREATE TABLE plain_vectors (
            id text PRIMARY KEY REFERENCES memories ON DELETE CASCADE,
            model text NOT NULL,
            norm_hash text NOT NULL,
            vector bytea NOT NULL,
            seq bigserial NOT NULL
        );
        CREATE INDEX plain_vectors_seq ON plain_vectors (model, seq);
        CREATE FUNCTION plain_vectors_stale() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            EXECUTE format('DELETE FROM %I.plain_vectors WHERE id = $1', TG_TABLE_SCHEMA)
                USING NEW.id;
            RETURN NULL;
        END $$;
        CREATE TRIGGER plain_vectors_stale AFTER UPDATE OF name, description, body ON memories
            FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name
                               OR OLD.description IS DISTINCT FROM NEW.description
                               OR OLD.body IS DISTINCT FROM NEW.body)
            EXECUTE FUNCTION plain_vectors_stale();
        """,
    ),
    (
        "search context and the day a memory is about, in the tsvector (weight D) with the "
        "days of created and date as words (month and year, weekday, ISO date)",
        """
        ALTER TABLE memories ADD COLUMN context text NOT NULL DEFAULT '',
                             ADD COLUMN date date;
        CREATE OR REPLACE FUNCTION memories_search_vector() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.search :=
                setweight(to_tsvector('english', NEW.name), 'A') ||
                setweight(to_tsvector('english', NEW.description || ' ' ||
                                      array_to_string(NEW.tags, ' ')), 'B') ||
                setweight(to_tsvector('english', NEW.body), 'C') ||
                setweight(to_tsvector('english', array_to_string(NEW.paths, ' ') || ' ' ||
                    NEW.context || ' ' || concat_ws(' ',
                    to_char(NEW.created AT TIME ZONE 'UTC', 'FMMonth YYYY FMDay YYYY-MM-DD'),
                    CASE WHEN NEW.date IS DISTINCT FROM (NEW.created AT TIME ZONE 'UTC')::date
                         THEN to_char(NEW.date, 'FMMonth YYYY FMDay YYYY-MM-DD') END)), 'D');
            RETURN NEW;
        END $$;
        DROP TRIGGER memories_search_vector ON memories;
        CREATE TRIGGER memories_search_vector
            BEFORE INSERT OR UPDATE OF name, description, tags, body, paths, context, date,
                created ON memories
            FOR EACH ROW EXECUTE FUNCTION memories_search_vector();
        UPDATE memories SET context = context;
        """,
    ),
    ("exact duplicates ignore trailing sentence punctuation and surrounding quotes: "
     "norm_hash recomputed where it does not collide", _rehash),
    (
        "uses apart from shows: how many sessions drew on a memory (used_count, last_used) "
        "and when a session drew on one it was given (recall_surfaced.used)",
        """
        ALTER TABLE memories ADD COLUMN used_count integer NOT NULL DEFAULT 0,
                             ADD COLUMN last_used timestamptz;
        ALTER TABLE recall_surfaced ADD COLUMN used timestamptz;
        """,
    ),
    (
        "uses known apart from uses missed: recall_surfaced.checked is 1 once a check read "
        "all the agent did after the injection, 0 when a stretch went unread; stats count "
        "only injections used or checked",
        """
        ALTER TABLE recall_surfaced ADD COLUMN checked smallint;
        UPDATE recall_surfaced SET checked = 1 WHERE used IS NOT NULL;
        """,
    ),
)

_VECTORS = """
CREATE TABLE IF NOT EXISTS embeddings (
    id text PRIMARY KEY REFERENCES memories ON DELETE CASCADE,
    model text NOT NULL,
    norm_hash text NOT NULL,
    vector {pgvector}.vector NOT NULL
)
"""
# AFTER, not BEFORE: the memory's new row is written whatever happens to its vector.
_STALE = """
CREATE OR REPLACE FUNCTION embeddings_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.embeddings WHERE id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER embeddings_stale AFTER UPDATE OF name, description, body ON memories
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name
                       OR OLD.description IS DISTINCT FROM NEW.description
                       OR OLD.body IS DISTINCT FROM NEW.body)
    EXECUTE FUNCTION embeddings_stale();
"""
# A partial expression index: the column has no fixed size (HNSW needs one), and a vector
# of another size must still be insertable.
_HNSW = """
CREATE INDEX IF NOT EXISTS {name} ON embeddings USING hnsw
    ((vector::{pgvector}.vector({dim})) {pgvector}.vector_cosine_ops)
    WHERE {pgvector}.vector_dims(vector) = {dim}
"""


@dataclass(frozen=True)
class Pgvector:
    """The pgvector extension of a database: the schema of its type and operators, its
    version."""

    schema: str
    version: tuple[int, ...]

    @property
    def hnsw(self) -> bool:
        return self.version >= (0, 5)


def migrate(conn: psycopg.Connection[Any], schema: str) -> Pgvector | None:
    """Create the schema and apply the missing migrations, serialised across processes by an
    advisory lock. ``conn`` must be in autocommit mode with ``search_path`` set to
    ``schema``. Returns pgvector where vector storage is available, else None."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"memdir:{schema}",))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY "
                     "KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())")
        cur = conn.cursor(row_factory=tuple_row)
        done = {row[0] for row in cur.execute("SELECT version FROM schema_migrations")}
        for version, (name, statements) in enumerate(MIGRATIONS, start=1):
            if version not in done:
                if isinstance(statements, str):  # no parameters: many statements
                    conn.execute(statements.encode("utf-8"))
                else:
                    statements(conn)
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                             (version, name))
        return _vectors(conn, schema)


def _vectors(conn: psycopg.Connection[Any], schema: str) -> Pgvector | None:
    """The embeddings table, its trigger and index, where pgvector can be had; None (and
    nothing created) elsewhere."""
    cur = conn.cursor(row_factory=tuple_row)
    if cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() \
            is None:
        return None
    try:
        with conn.transaction():  # a savepoint: a refused CREATE EXTENSION spoils nothing
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
            row = cur.execute(
                "SELECT n.nspname, e.extversion FROM pg_extension e JOIN pg_namespace n "
                "ON n.oid = e.extnamespace WHERE e.extname = 'vector'").fetchone()
            if row is None:
                return None
            found = Pgvector(row[0], _version(row[1]))
            ext = sql.Identifier(found.schema)
            conn.execute(sql.SQL(_VECTORS).format(pgvector=ext))
            # Each made once, looked up first: CREATE would lock the table at every start.
            if cur.execute("SELECT 1 FROM pg_trigger WHERE tgname = 'embeddings_stale' AND "
                           "tgrelid = 'memories'::regclass").fetchone() is None:
                conn.execute(sql.SQL(_STALE).format(schema=sql.Identifier(schema)))
    except psycopg.Error:
        return None  # e.g. not allowed to create extensions: full-text search only
    index = f"embeddings_cosine_{DIM}"
    if found.hnsw and cur.execute("SELECT to_regclass(%s)", (index,)).fetchone() == (None,):
        try:
            with conn.transaction():
                conn.execute(sql.SQL(_HNSW).format(name=sql.Identifier(index), pgvector=ext,
                                                   dim=sql.Literal(DIM)))
        except psycopg.Error as exc:  # exact scans still find the nearest, only slower
            warn("memdir: no HNSW index on the vectors (%s)", str(exc).strip())
    return found


def _version(text: str) -> tuple[int, ...]:
    """``0.8.2`` as (0, 8, 2); a part that is not a number ends it."""
    parts: list[int] = []
    for part in text.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)
