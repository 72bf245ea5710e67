"""The SQL of the triggers that keep ``memories_fts`` (the FTS5 index of ``memories``) in step
with its rows, for the index migrations that change the FTS5 columns.

Invariant: the SQL produced for given columns is fixed once a migration using it is released
(migrations are never edited), so this text changes only by a new function.
"""

from __future__ import annotations

__all__ = ["fts_triggers"]


def fts_triggers(columns: str) -> str:
    """memories_fts's three triggers over ``columns`` (as migration 15 made them: rows of a
    deferred bulk write are listed in fts_pending, see Index.deferred_fts). For migrations
    that change the FTS5 columns; the SQL each produced is fixed once released."""
    new = ", ".join(f"new.{c.strip()}" for c in columns.split(","))
    old = ", ".join(f"old.{c.strip()}" for c in columns.split(","))
    return f"""
        CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, {columns}) SELECT new.rowid, {new}
            WHERE NOT EXISTS (SELECT 1 FROM fts_deferred);
            INSERT INTO fts_pending (row)
            SELECT new.rowid WHERE EXISTS (SELECT 1 FROM fts_deferred);
        END;
        CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, {columns})
            SELECT 'delete', old.rowid, {old}
            WHERE NOT EXISTS (SELECT 1 FROM fts_pending WHERE row = old.rowid);
            DELETE FROM fts_pending WHERE row = old.rowid;
        END;
        CREATE TRIGGER memories_au AFTER UPDATE OF {columns} ON memories
        WHEN NOT EXISTS (SELECT 1 FROM fts_pending WHERE row = old.rowid) BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, {columns})
            VALUES ('delete', old.rowid, {old});
            INSERT INTO memories_fts (rowid, {columns}) VALUES (new.rowid, {new});
        END;
        """
