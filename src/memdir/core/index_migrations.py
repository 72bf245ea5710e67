"""The SQLite index's migrations, in order: what each one changes and why.

Invariants (applied by :func:`memdir.core.index_schema.migrate`):
- A migration is never edited once released: a change to the schema is a new migration at
  the end, so every index, however old, reaches the same schema. A migration that needs a
  formula copies it (migrations are history; the code's formula may change later).
- Rows of ``memories`` are derived from the files; a migration may drop them (the next
  reconcile rebuilds them) but never the ``usage`` table, which is not derived.
- Functions a migration calls beyond SQLite's own (``memdir_norm_hash``, ``memdir_norm_hash_v1``,
  the math functions) are registered by ``migrate`` before it applies any.
"""

from __future__ import annotations

from memdir.core.index_fts import fts_triggers as _fts_triggers
from memdir.core.index_schema_early import EARLY

__all__ = ["MIGRATIONS"]


MIGRATIONS: tuple[tuple[str, str], ...] = (
    *EARLY,  # 1-12, in memdir.core.index_schema_early
    (
        "FTS5 rows of a bulk write added in one statement at its end (Index.deferred_fts)",
        # One FTS5 insert per row costs twice what one INSERT ... SELECT over the same rows
        # does (20,000 memories in one transaction: 2.5 -> 1.2 s). While fts_deferred holds
        # its row (only ever inside one write transaction), an inserted row is listed in
        # fts_pending instead of FTS5, and the update and delete triggers leave listed rows
        # alone. Rows are listed, not taken as "above the largest rowid before": SQLite
        # reuses the largest rowid when its row is deleted. Each trigger is one, its steps
        # in order: two triggers on one event would fire in an unspecified order.
        """
        CREATE TABLE fts_deferred (one INTEGER PRIMARY KEY CHECK (one = 1));
        CREATE TABLE fts_pending (row INTEGER PRIMARY KEY);
        DROP TRIGGER memories_ai;
        DROP TRIGGER memories_ad;
        DROP TRIGGER memories_au;
        CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, name, description, body, tags, paths)
            SELECT new.rowid, new.name, new.description, new.body, new.tags, new.paths
            WHERE NOT EXISTS (SELECT 1 FROM fts_deferred);
            INSERT INTO fts_pending (row)
            SELECT new.rowid WHERE EXISTS (SELECT 1 FROM fts_deferred);
        END;
        CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, name, description, body, tags, paths)
            SELECT 'delete', old.rowid, old.name, old.description, old.body, old.tags,
                   old.paths
            WHERE NOT EXISTS (SELECT 1 FROM fts_pending WHERE row = old.rowid);
            DELETE FROM fts_pending WHERE row = old.rowid;
        END;
        CREATE TRIGGER memories_au AFTER UPDATE OF name, description, body, tags, paths
        ON memories WHEN NOT EXISTS (SELECT 1 FROM fts_pending WHERE row = old.rowid) BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, name, description, body, tags, paths)
            VALUES ('delete', old.rowid, old.name, old.description, old.body, old.tags,
                    old.paths);
            INSERT INTO memories_fts (rowid, name, description, body, tags, paths)
            VALUES (new.rowid, new.name, new.description, new.body, new.tags, new.paths);
        END;
        """,
    ),
    (
        "the time of the last change as a Julian day number, in the strength index",
        # The strength ranking parsed every row's ISO text with julianday(): half its cost
        # (10k memories: 19 -> 11 ms on every session start). Index.upsert fills the column
        # from the same text. Layer A orders by it as it did by the text (one format).
        """
        ALTER TABLE memories ADD COLUMN updated_jd REAL;
        UPDATE memories SET updated_jd = julianday(updated);
        DROP INDEX memories_strength;
        CREATE INDEX memories_strength ON memories
            (dir, status, type, relevance, updated_jd, reinforced, id, file);
        """,
    ),
    (
        "a time-free strength key per memory, indexed: the strongest memories read in order",
        # Session-start context computed every active memory's strength to keep the best 400
        # (10k memories: 9 ms warm, 15-25 ms in a new process; 100k: ten times that). The key
        # orders memories as their strength does at any time (memdir.core.index.strength_key_sql,
        # whose formula this copies: migrations are history), so the ranking reads the strongest
        # few hundred from this index (memdir.retrieval.ranking). Index.upsert and Index.touch keep
        # it.
        """
        ALTER TABLE memories ADD COLUMN strength_key REAL;
        UPDATE memories SET strength_key = log2(relevance * (1 + 0.25 * ln(1 + max(0, reinforced
            + COALESCE((SELECT access_count FROM usage
                        WHERE dir = memories.dir AND id = memories.id), 0)))))
            + max(updated_jd, COALESCE((SELECT julianday(last_accessed) FROM usage
                                        WHERE dir = memories.dir AND id = memories.id), 0))
            / 90.0;
        CREATE INDEX memories_strength_key ON memories
            (status, strength_key, dir, type, relevance, updated_jd, reinforced, id);
        """,
    ),
    (
        "the extraction cursor's place in the transcript file (hooks read on from there)",
        # byte_offset: where the last read of the session's transcript ended (a line start);
        # offset_index: the index of the last message before it, so a read from the offset
        # numbers its messages as a read from the start would (memdir.agents.hook_transcript).
        """
        ALTER TABLE extract_cursor ADD COLUMN byte_offset INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE extract_cursor ADD COLUMN offset_index INTEGER NOT NULL DEFAULT -1;
        """,
    ),
    (
        "memory files holding a secret are not indexed: every file is checked again by the "
        "next reconcile (rows and fingerprints are derived)",
        """
        DELETE FROM memories;
        DELETE FROM broken;
        DELETE FROM dir_state;
        """,
    ),
    (
        "the MEMORY.md memdir last wrote in each directory (its inode, size and mtime): one "
        "that still matches holds only indexed memories and needs no secret check when injected",
        """
        CREATE TABLE listing_written (
            dir TEXT PRIMARY KEY, ino INTEGER NOT NULL, size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL
        ) WITHOUT ROWID;
        """,
    ),
    (
        "search context and date words: memories get context, date and dates columns, and FTS5 "
        "indexes context and dates in columns of their own (rows are derived: the next "
        "reconcile rebuilds them with their words)",
        # The FTS5 table and its triggers go first, so dropping the rows costs no FTS5 work.
        """
        DROP TRIGGER memories_ai;
        DROP TRIGGER memories_ad;
        DROP TRIGGER memories_au;
        DROP TABLE memories_fts;
        DELETE FROM fts_pending;
        DELETE FROM memories;
        DELETE FROM broken;
        DELETE FROM dir_state;
        ALTER TABLE memories ADD COLUMN context TEXT NOT NULL DEFAULT '';
        ALTER TABLE memories ADD COLUMN date TEXT;
        ALTER TABLE memories ADD COLUMN dates TEXT NOT NULL DEFAULT '';
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            name, description, body, tags, paths, context, dates,
            content='memories', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        """ + _fts_triggers("name, description, body, tags, paths, context, dates"),
    ),
    (
        "session chunks get the message before them (context) and their day as words (dates), "
        "indexed in columns of their own (chunks indexed before this have neither until their "
        "session is indexed again)",
        """
        DROP TRIGGER session_chunks_ai;
        DROP TRIGGER session_chunks_ad;
        DROP TABLE session_fts;
        ALTER TABLE session_chunks ADD COLUMN context TEXT NOT NULL DEFAULT '';
        ALTER TABLE session_chunks ADD COLUMN dates TEXT NOT NULL DEFAULT '';
        CREATE VIRTUAL TABLE session_fts USING fts5(
            text, context, dates, content='session_chunks', content_rowid='rowid',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        INSERT INTO session_fts (session_fts) VALUES ('rebuild');
        CREATE TRIGGER session_chunks_ai AFTER INSERT ON session_chunks BEGIN
            INSERT INTO session_fts (rowid, text, context, dates)
            VALUES (new.rowid, new.text, new.context, new.dates);
        END;
        CREATE TRIGGER session_chunks_ad AFTER DELETE ON session_chunks BEGIN
            INSERT INTO session_fts (session_fts, rowid, text, context, dates)
            VALUES ('delete', old.rowid, old.text, old.context, old.dates);
        END;
        """,
    ),
    (
        "exact duplicates ignore trailing sentence punctuation and surrounding quotes: "
        "norm_hash recomputed (a vector made from the same text stays fresh)",
        # memdir_norm_hash is memdir.core.store.norm_hash, memdir_norm_hash_v1 the hash before
        # (registered by migrate). A row whose hash is not its indexed body's (the file has a
        # <private> span, which the row has not) is read again from its file by the next
        # reconcile: mtime_ns -1 and no dir_state row make it look changed.
        """
        UPDATE memories SET mtime_ns = -1 WHERE norm_hash != memdir_norm_hash_v1(body);
        DELETE FROM dir_state WHERE dir IN (SELECT dir FROM memories WHERE mtime_ns = -1);
        UPDATE embeddings SET norm_hash = memdir_norm_hash(m.body) FROM memories m
        WHERE m.dir = embeddings.dir AND m.file = embeddings.file
            AND m.norm_hash = embeddings.norm_hash AND m.mtime_ns != -1;
        UPDATE memories SET norm_hash = memdir_norm_hash(body) WHERE mtime_ns != -1;
        """,
    ),
    (
        "uses apart from shows: usage counts the sessions whose agent drew on a memory "
        "(used_count, last_used), recall_surfaced when it did (used), and the strength key is "
        "the bounded formula's",
        # memdir.core.strength's boost, written out (migrations are history): a memory's access
        # count (shown) and its uses plus reinforcements, saturating, at most 1.
        """
        ALTER TABLE usage ADD COLUMN used_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE usage ADD COLUMN last_used TEXT;
        ALTER TABLE recall_surfaced ADD COLUMN used TEXT;
        UPDATE memories SET strength_key = log2(relevance * COALESCE(
            (SELECT 1.0 - 0.5 * exp(-(0.5 * max(0, max(0, memories.reinforced) + used_count)
                                      + 0.5 * (1.0 - exp(-max(0, access_count) / 10.0))))
             FROM usage WHERE dir = memories.dir AND id = memories.id),
            1.0 - 0.5 * exp(-(0.5 * max(0, memories.reinforced)))))
            + max(updated_jd, COALESCE((SELECT julianday(last_accessed) FROM usage
                                        WHERE dir = memories.dir AND id = memories.id), 0))
            / 90.0;
        """,
    ),
    (
        "MEMORY.md entries cut between words, a description that continues the name said "
        "once: index lines recomputed, and MEMORY.md rewritten by the next reconcile",
        # memdir_index_line is memdir.core.listing.index_line. The rows whose line changes are read
        # again from their files (mtime_ns -1, no dir_state row): the reconcile that does so
        # regenerates their directory's MEMORY.md.
        """
        UPDATE memories SET mtime_ns = -1
        WHERE index_line != memdir_index_line(name, file, type, description);
        DELETE FROM dir_state WHERE dir IN (SELECT dir FROM memories WHERE mtime_ns = -1);
        """,
    ),
    (
        "uses known apart from uses missed: recall_surfaced.checked is 1 once the stop hook "
        "read all the agent did after the injection, 0 when a stretch went unread; stats "
        "count only injections used or checked (those used before this count as checked, "
        "the others' uses are unknown)",
        """
        ALTER TABLE recall_surfaced ADD COLUMN checked INTEGER;
        UPDATE recall_surfaced SET checked = 1 WHERE used IS NOT NULL;
        """,
    ),
)
