"""The index's first twelve migrations, as released: the schema up to the directory
fingerprints. :mod:`memdir.core.index_schema` applies them, first, with the later ones.

Invariant: released migrations are never edited (see :mod:`memdir.core.index_schema`); a change to
the schema is a new migration at the end of ``index_schema.MIGRATIONS``.
"""

from __future__ import annotations

__all__ = ["EARLY"]

EARLY: tuple[tuple[str, str], ...] = (
    (
        "create memories, usage, broken and the FTS5 mirror",
        """
        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            dir TEXT NOT NULL, file TEXT NOT NULL, scope TEXT NOT NULL,
            id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,
            type TEXT NOT NULL, body TEXT NOT NULL, relevance REAL NOT NULL,
            tags TEXT NOT NULL, paths TEXT NOT NULL, source TEXT NOT NULL,
            created TEXT NOT NULL, updated TEXT NOT NULL, reinforced INTEGER NOT NULL,
            status TEXT NOT NULL, superseded_by TEXT, meta TEXT NOT NULL,
            norm_hash TEXT NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
            UNIQUE (dir, file)
        );
        CREATE INDEX memories_id ON memories (dir, id);
        CREATE INDEX memories_hash ON memories (dir, norm_hash);
        CREATE INDEX memories_listing ON memories (dir, status, relevance DESC);
        CREATE TABLE usage (
            dir TEXT NOT NULL, id TEXT NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0, last_accessed TEXT,
            PRIMARY KEY (dir, id)
        ) WITHOUT ROWID;
        CREATE TABLE broken (
            dir TEXT NOT NULL, file TEXT NOT NULL, error TEXT NOT NULL, hint TEXT NOT NULL,
            mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, PRIMARY KEY (dir, file)
        ) WITHOUT ROWID;
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            name, description, body, tags, paths,
            content='memories', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, name, description, body, tags, paths)
            VALUES (new.rowid, new.name, new.description, new.body, new.tags, new.paths);
        END;
        CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, name, description, body, tags, paths)
            VALUES ('delete', old.rowid, old.name, old.description, old.body, old.tags,
                    old.paths);
        END;
        CREATE TRIGGER memories_au AFTER UPDATE OF name, description, body, tags, paths
        ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, name, description, body, tags, paths)
            VALUES ('delete', old.rowid, old.name, old.description, old.body, old.tags,
                    old.paths);
            INSERT INTO memories_fts (rowid, name, description, body, tags, paths)
            VALUES (new.rowid, new.name, new.description, new.body, new.tags, new.paths);
        END;
        """,
    ),
    (
        "MEMORY.md line per memory and covering indexes for the index file and reconcile "
        "(rows are derived: the next reconcile rebuilds them)",
        """
        DELETE FROM memories;
        DELETE FROM broken;
        ALTER TABLE memories ADD COLUMN index_line TEXT NOT NULL DEFAULT '';
        DROP INDEX memories_listing;
        CREATE INDEX memories_listing ON memories
            (dir, status, relevance DESC, updated DESC, file, index_line);
        CREATE INDEX memories_files ON memories (dir, file, mtime_ns, size);
        """,
    ),
    (
        "directory fingerprints: reconcile skips an unchanged directory",
        """
        CREATE TABLE dir_state (dir TEXT PRIMARY KEY, fingerprint TEXT NOT NULL) WITHOUT ROWID;
        """,
    ),
    (
        "per-session recall state (shared by separate hook processes) and LLM call counts",
        """
        CREATE TABLE recall_sessions (
            session_id TEXT PRIMARY KEY, bytes INTEGER NOT NULL DEFAULT 0,
            recalls INTEGER NOT NULL DEFAULT 0, started TEXT NOT NULL, updated TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE recall_surfaced (
            session_id TEXT NOT NULL, dir TEXT NOT NULL, id TEXT NOT NULL,
            surfaced TEXT NOT NULL, PRIMARY KEY (session_id, dir, id)
        ) WITHOUT ROWID;
        CREATE TABLE llm_calls (
            day TEXT NOT NULL, provider TEXT NOT NULL, purpose TEXT NOT NULL,
            calls INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0,
            input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (day, provider, purpose)
        ) WITHOUT ROWID;
        """,
    ),
    (
        "indexed session transcripts (chunks + FTS5) and the extraction cursor per session",
        """
        CREATE TABLE session_chunks (
            rowid INTEGER PRIMARY KEY,
            dir TEXT NOT NULL, session_id TEXT NOT NULL, chunk INTEGER NOT NULL,
            first_message INTEGER NOT NULL, last_message INTEGER NOT NULL,
            started TEXT, text TEXT NOT NULL, transcript TEXT NOT NULL DEFAULT '',
            UNIQUE (dir, session_id, chunk)
        );
        CREATE VIRTUAL TABLE session_fts USING fts5(
            text, content='session_chunks', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER session_chunks_ai AFTER INSERT ON session_chunks BEGIN
            INSERT INTO session_fts (rowid, text) VALUES (new.rowid, new.text);
        END;
        CREATE TRIGGER session_chunks_ad AFTER DELETE ON session_chunks BEGIN
            INSERT INTO session_fts (session_fts, rowid, text) VALUES ('delete', old.rowid,
                                                                       old.text);
        END;
        CREATE TABLE extract_cursor (
            session_id TEXT PRIMARY KEY, message_index INTEGER NOT NULL,
            updated TEXT NOT NULL
        ) WITHOUT ROWID;
        """,
    ),
    (
        "embedding vectors per memory file (optional extra; keyed by the text they encode)",
        """
        CREATE TABLE embeddings (
            dir TEXT NOT NULL, file TEXT NOT NULL, model TEXT NOT NULL,
            norm_hash TEXT NOT NULL, vector BLOB NOT NULL, seq INTEGER NOT NULL,
            PRIMARY KEY (dir, file)
        ) WITHOUT ROWID;
        """,
    ),
    (
        "a covering index for the strength ranking (context's layers B and C)",
        # Every column the strength expression reads, so ranking a store never touches the
        # wide rows (bodies): 25 ms -> 9 ms at 10k memories, on every session start.
        """
        CREATE INDEX memories_strength ON memories
            (dir, status, type, relevance, updated, reinforced, id);
        """,
    ),
    (
        "an index for the vector cache's version check (count and last seq per directory)",
        # Hybrid search checks whether its in-memory matrix is current before every query;
        # without this index that check reads every vector: 14 ms -> 0.6 ms at 10k memories.
        """
        CREATE INDEX embeddings_seq ON embeddings (dir, model, seq);
        """,
    ),
    (
        "the strength index covers layer A too (its order ends with the file name)",
        # Layer A orders the always-on types by relevance, updated, file: without the file in
        # the index each candidate read its wide row (4 ms -> 1.5 ms at 10k memories).
        """
        DROP INDEX memories_strength;
        CREATE INDEX memories_strength ON memories
            (dir, status, type, relevance, updated, reinforced, id, file);
        """,
    ),
    (
        "the listing index covers MEMORY.md's overflow pages (they group lines by type)",
        # Past 180 memories MEMORY.md's regeneration reads every line with its type: without
        # the type in the index each line read its wide row (100k memories: 218 -> 105 ms,
        # on every store).
        """
        DROP INDEX memories_listing;
        CREATE INDEX memories_listing ON memories
            (dir, status, relevance DESC, updated DESC, file, type, index_line);
        """,
    ),
    (
        "a checksum of the file names with each directory fingerprint",
        # memdir's own writes carry the fingerprint forward (memdir.core.fingerprint) instead of
        # leaving the next reconcile to compare every row (100k memories: 400 ms per write).
        """
        ALTER TABLE dir_state ADD COLUMN names INTEGER;
        """,
    ),
    (
        "a generation and a save time with each directory fingerprint",
        # The generation lets a reconcile that compared without the lock save its fingerprint
        # only if no write changed the directory's rows meanwhile; the save time tells a
        # fingerprint taken in the same clock tick as a change (coarse timestamps) from one
        # that is safe to trust on the directory's mtime alone (memdir.core.fingerprint).
        """
        ALTER TABLE dir_state ADD COLUMN gen INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE dir_state ADD COLUMN saved_ns INTEGER NOT NULL DEFAULT 0;
        """,
    ),
)
