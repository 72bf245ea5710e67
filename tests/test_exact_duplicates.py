"""Exact duplicates ignore trailing sentence punctuation and surrounding quotes (as they
ignore case and spaces), in both stores; internal punctuation stays significant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memdir import Memdir
from memdir.core.store import normalise
from memdir.team.postgres import PostgresStore
from pg_support import DSN, fresh_schema


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, home: Path, repo: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        with Memdir(home=home, project=repo, sync_interval=0) as md:
            yield md
    else:
        with fresh_schema() as schema, PostgresStore(DSN, schema=schema) as pg:
            yield pg


@pytest.mark.parametrize(("text", "expected"), [
    ("I prefer pnpm over npm.", "i prefer pnpm over npm"),
    ('"I prefer pnpm over npm"', "i prefer pnpm over npm"),
    ("\u201cI prefer pnpm over npm.\u201d", "i prefer pnpm over npm"),
    ("`I prefer pnpm over npm`!?", "i prefer pnpm over npm"),
    ("Really? Yes . ;", "really? yes"),
    ("v1.2", "v1.2"),
    ("...", "..."),
])
def test_normalise(text: str, expected: str) -> None:
    assert normalise(text) == expected


def test_punctuation_and_quotes_make_no_second_memory(store: Any) -> None:
    first = store.store("I prefer pnpm over npm.", type="preference")
    again = store.store("I prefer pnpm over npm", type="preference")
    assert again.id == first.id and again.reinforced == 1
    quoted = store.store('"I prefer pnpm over npm"', type="preference")
    assert quoted.id == first.id and quoted.reinforced == 2
    other = store.store("I prefer npm over pnpm", type="preference")
    assert other.id != first.id
    version = store.store("Pin the tool at v1.2", type="fact")
    assert store.store("Pin the tool at v12", type="fact").id != version.id
    assert len(store.list(status="all")) == 4


def test_an_index_with_the_old_hashes_is_migrated(home: Path, repo: Path) -> None:
    """An index written before trailing punctuation was ignored (its norm_hash folds only case
    and spaces) is migrated: the sentence without its full stop reinforces the memory stored
    with it, and no second file appears."""
    import hashlib
    import sqlite3

    from memdir.core.index_schema import MIGRATIONS

    with Memdir(home=home, project=repo, sync_interval=0) as md:
        first = md.store("I prefer pnpm over npm.", type="preference")
        other = md.store("Deploys go through staging", type="decision")
    conn = sqlite3.connect(home / "index.sqlite", isolation_level=None)
    for dir_, file, body in conn.execute("SELECT dir, file, body FROM memories").fetchall():
        old = hashlib.sha1(" ".join(body.lower().split()).encode("utf-8")).hexdigest()
        conn.execute("UPDATE memories SET norm_hash = ? WHERE dir = ? AND file = ?",
                     (old, dir_, file))
    latest = len(MIGRATIONS)
    rehash = next(n for n, (name, _) in enumerate(MIGRATIONS, start=1)
                  if name.startswith("exact duplicates ignore trailing"))
    conn.execute("DELETE FROM schema_migrations WHERE version = ?", (rehash,))
    conn.close()
    with Memdir(home=home, project=repo, sync_interval=0) as md:
        again = md.store("I prefer pnpm over npm", type="preference")
        assert again.id == first.id and again.reinforced == 1
        assert md.get(other.id).reinforced == 0
        assert md.index.conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[
            0] == latest
        assert first.path is not None and other.path is not None
        names = sorted(p.name for p in first.path.parent.glob("*.md") if p.name != "MEMORY.md")
        assert names == sorted([first.path.name, other.path.name])
