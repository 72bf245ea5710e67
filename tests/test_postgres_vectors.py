"""The PostgreSQL store with pgvector: vectors written with the memories, filled lazily, and
hybrid search (words and meaning fused) with the filters and counters of plain search.

The pgvector server is a real PostgreSQL with the extension, started once per session from
the ``pgserver`` wheel (``pgvector_dsn`` in tests/pg_support.py); "no pgvector" is the
local PostgreSQL 15 of the other PostgreSQL tests. The embedding model is the real one (the
``embed`` extra), loaded once per process.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import pg_support
from memdir.embed import MODEL_NAME, load_embedder
from memdir.model import Memory
from memdir.postgres import PostgresStore
from memdir.semantic import BATCH, vector_text
from memdir.store import norm_hash
from server_support import running_server, store_memory

pgvector_dsn, pg_schema, pg_store = pg_support.pgvector_dsn, pg_support.pg_schema, \
    pg_support.pg_store  # fixtures

RELEASE = "Release pipeline: CI/CD considerations before shipping"
UNRELATED = [
    "The office coffee machine is descaled every Friday",
    "Use tabs, not spaces, in the Makefile recipes",
    "Alice prefers dark mode in every editor",
    "The logo's blue is #1E40AF",
    "Lunch orders go in the #food channel before 11",
]


@contextlib.contextmanager
def schema_on(dsn: str) -> Iterator[str]:
    """A fresh schema name on the pgvector server; dropped at the end."""
    name = f"memdir_test_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(name)))


@contextlib.contextmanager
def database_on(dsn: str) -> Iterator[str]:
    """A fresh database on the pgvector server (for the default schema): its DSN."""
    name = f"memdir_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))


@pytest.fixture
def vschema(pgvector_dsn: str) -> Iterator[str]:
    with schema_on(pgvector_dsn) as name:
        yield name


@pytest.fixture
def vstore(pgvector_dsn: str, vschema: str) -> Iterator[PostgresStore]:
    with PostgresStore(pgvector_dsn, schema=vschema, semantic=True) as store:
        yield store


def rows(store: PostgresStore, query: str, params: Any = ()) -> list[dict[str, Any]]:
    with store.connections.db() as conn:
        return list(conn.execute(query, params).fetchall())


def vectors(store: PostgresStore) -> dict[str, tuple[str, str, str]]:
    """id -> (model, norm_hash, vector as text) of every stored vector."""
    return {r["id"]: (r["model"], r["norm_hash"], r["v"]) for r in rows(
        store, "SELECT id, model, norm_hash, vector::text AS v FROM embeddings")}


def cosine(text: str, vector: str) -> float:
    import numpy as np

    embedder = load_embedder()
    assert embedder is not None
    stored = np.array([float(x) for x in vector.strip("[]").split(",")], dtype=np.float32)
    return float(embedder.embed([text])[0] @ stored)


def ids(hits: Any) -> list[str]:
    return [h.memory.id for h in hits]


def test_meaning_finds_what_words_miss(vstore: PostgresStore, pgvector_dsn: str,
                                       vschema: str, pg_store: PostgresStore) -> None:
    assert vstore.vectors and vstore.semantic
    release = vstore.store(RELEASE, type="fact")
    vstore.store_many([{"content": text, "type": "fact"} for text in UNRELATED])
    hits = vstore.search("deployment process")
    assert ids(hits)[:1] == [release.id]
    assert hits[0].score > 0 and hits[0].strength > 0
    recalled = vstore.recall("how does our deployment process work?", "session-1")
    assert release.id in [item.memory.id for item in recalled.items]
    # The same memories searched by words alone: nothing says "deployment" or "process".
    with PostgresStore(pgvector_dsn, schema=vschema, semantic=False) as words:
        assert not words.semantic and words.vectors
        assert words.search("deployment process") == []
    # The plain PostgreSQL (no pgvector) is the words alone, even when asked for meaning.
    pg_store.store(RELEASE, type="fact")
    assert pg_store.search("deployment process") == []
    assert pg_store.search("shipping")[0].memory.name == release.name


def test_schema_has_the_index_and_the_trigger_and_opens_again(vstore: PostgresStore,
                                                              pgvector_dsn: str,
                                                              vschema: str) -> None:
    indexes = {r["indexname"]: r["indexdef"] for r in rows(
        vstore, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND "
                "tablename = 'embeddings'", (vschema,))}
    assert "USING hnsw" in indexes["embeddings_cosine_384"]
    assert "vector_cosine_ops" in indexes["embeddings_cosine_384"]
    assert rows(vstore, "SELECT tgname FROM pg_trigger WHERE tgrelid = 'memories'::regclass "
                        "AND tgname = 'embeddings_stale'")
    kept = vstore.store(RELEASE, type="fact")
    for _ in range(2):  # the optional part is applied again without harm
        with PostgresStore(pgvector_dsn, schema=vschema, semantic=True) as again:
            assert again.semantic and ids(again.search("deployment process")) == [kept.id]


def test_pgvector_in_another_schema(pgvector_dsn: str) -> None:
    with database_on(pgvector_dsn) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA extensions")
            conn.execute("CREATE EXTENSION vector WITH SCHEMA extensions")
        with PostgresStore(dsn, semantic=True) as store:
            assert store.embeddings.pgvector is not None
            assert store.embeddings.pgvector.schema == "extensions"
            release = store.store(RELEASE, type="fact")
            assert ids(store.search("deployment process")) == [release.id]


def test_vectors_follow_the_memory(vstore: PostgresStore) -> None:
    memory = vstore.store(RELEASE, type="fact", tags=["ci"])
    model, hashed, first = vectors(vstore)[memory.id]
    assert (model, hashed) == (MODEL_NAME, norm_hash(memory.body))
    assert cosine(vector_text(memory.name, memory.description, memory.body), first) > 0.999
    # Tags, type, status and reinforcement leave the text, so the vector, as it was.
    vstore.update(memory.id, tags=["ci", "release"])
    vstore.reclassify(memory.id, "decision")
    vstore.archive(memory.id)
    vstore.restore(memory.id)
    again = vstore.store(RELEASE, type="fact", name="Another name for the same content")
    assert again.id == memory.id and again.reinforced == 1
    assert vectors(vstore)[memory.id] == (model, hashed, first)
    # A new body: a new vector, in the same transaction.
    changed = vstore.update(memory.id, content="Release pipeline: the staging soak takes 2h")
    _, hashed2, second = vectors(vstore)[memory.id]
    assert hashed2 == norm_hash(changed.body) != hashed and second != first
    assert cosine(vector_text(changed.name, changed.description, changed.body), second) > 0.999
    # A new name alone changes the text too.
    renamed = vstore.update(memory.id, name="Staging soak time")
    third = vectors(vstore)[memory.id][2]
    assert third != second
    assert cosine(vector_text(renamed.name, renamed.description, renamed.body), third) > 0.999
    # Deleting the memory deletes its vector.
    other = vstore.store(UNRELATED[0], type="fact")
    vstore.delete(memory.id)
    assert set(vectors(vstore)) == {other.id}


def test_store_many_and_put_write_every_vector(vstore: PostgresStore, pgvector_dsn: str,
                                               pg_schema: str) -> None:
    stored = vstore.store_many([{"content": text, "type": "fact"}
                                for text in [*UNRELATED, UNRELATED[0]]])
    assert len(stored) == len(UNRELATED) + 1 and stored[0].id == stored[-1].id
    assert set(vectors(vstore)) == {m.id for m in stored}
    # put (an import) keeps the ids it is given and writes their vectors in its transaction.
    with PostgresStore(pg_support.DSN, schema=pg_schema) as plain:
        exported = plain.store_many([{"content": RELEASE, "type": "fact"},
                                     {"content": UNRELATED[1], "type": "fact"}])
    written, skipped = vstore.put(exported)
    assert [m.id for m in written] == [exported[0].id]
    assert [why for _, why in skipped] == ["same content already stored"]
    assert exported[0].id in vectors(vstore)
    assert ids(vstore.search("deployment process"))[:1] == [exported[0].id]


def test_existing_memories_are_filled_lazily_in_batches(pgvector_dsn: str,
                                                        vschema: str) -> None:
    count = BATCH + 20
    with PostgresStore(pgvector_dsn, schema=vschema, semantic=False) as words:
        stored = words.store_many([{"content": f"The plant on desk {n} needs water weekly",
                                    "type": "fact"} for n in range(count - 1)])
        release = words.store(RELEASE, type="fact")
    with PostgresStore(pgvector_dsn, schema=vschema, semantic=True) as store:
        assert vectors(store) == {}
        store.search("coffee")
        assert len(vectors(store)) == BATCH  # one batch per search: never the whole store
        store.search("coffee")
        assert set(vectors(store)) == {m.id for m in [*stored, release]}
        assert store.embeddings.fill(store.connections) == 0
        assert release.id in ids(store.search("deployment process"))
    # A store with vectors off that changes the text: the old vector is dropped (the
    # trigger), and a later search embeds the new text.
    with PostgresStore(pgvector_dsn, schema=vschema, semantic=False) as words:
        words.update(release.id, content="Release pipeline: tag, build, sign, publish")
        assert release.id not in vectors(words)
    with PostgresStore(pgvector_dsn, schema=vschema, semantic=True) as later:
        assert release.id in ids(later.search("how do we publish a build"))
        assert vectors(later)[release.id][1] == norm_hash(
            "Release pipeline: tag, build, sign, publish")


def test_filters_hold_in_hybrid_results(vstore: PostgresStore) -> None:
    fact = vstore.store("Deployments go through the release pipeline", type="fact",
                        tags=["ci"])
    decision = vstore.store("We decided to ship releases only on Mondays", type="decision",
                            scope="team")
    archived = vstore.store("The old deploy script pushed straight to production",
                            type="fact", tags=["ci"])
    vstore.archive(archived.id)
    vstore.store_many([{"content": text, "type": "fact"} for text in UNRELATED])
    query = "how do we deploy a release"
    found = ids(vstore.search(query))
    assert fact.id in found and decision.id in found and archived.id not in found
    assert archived.id in ids(vstore.search(query, include_archived=True))
    assert set(ids(vstore.search(query, types=["decision"]))) == {decision.id}
    assert decision.id not in ids(vstore.search(query, types=["fact"]))
    assert set(ids(vstore.search(query, scopes=["team"]))) == {decision.id}
    assert set(ids(vstore.search(query, tags=["ci"]))) == {fact.id}
    assert set(ids(vstore.search(query, tags=["ci"], include_archived=True))) == {
        fact.id, archived.id}
    assert len(vstore.search(query, limit=2)) == 2


def test_search_counts_an_access_of_each_hit(vstore: PostgresStore) -> None:
    release = vstore.store(RELEASE, type="fact")
    vstore.search("deployment process", touch=False)
    assert vstore.list()[0].access_count == 0
    hits = vstore.search("deployment process")
    assert ids(hits) == [release.id]
    counted = {m.id: m for m in vstore.list()}[release.id]
    assert counted.access_count == 1 and counted.last_accessed is not None


HOSTILE = ['"', "'", "AND OR NOT", "deploy*", "title:deploy", "(((", "a -b +c", "NEAR(a b)",
           "'; DROP TABLE memories; --", "\x00 deploy", "🚀 deploy", "!!!", "  ", "",
           "deploy " * 2000, "ñandú über façade", "<private>x</private>", "%s %(x)s {}"]


def test_fts_syntax_and_hostile_queries_never_raise(vstore: PostgresStore) -> None:
    release = vstore.store(RELEASE, type="fact")
    for query in HOSTILE:
        hits = vstore.search(query)
        assert isinstance(hits, list), query
    assert vstore.search("") == [] and vstore.search("   ") == []
    assert ids(vstore.search("'; DROP TABLE memories; -- shipping")) == [release.id]
    assert vstore.get(release.id).body == RELEASE


def test_semantic_off_is_todays_behaviour(pgvector_dsn: str, vschema: str,
                                          pg_store: PostgresStore,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with PostgresStore(pgvector_dsn, schema=vschema, semantic=False) as off:
        assert off.vectors and not off.semantic
        off.store(RELEASE, type="fact")
        assert vectors(off) == {} and off.search("deployment process") == []
        assert [h.memory.body for h in off.search("shipping")] == [RELEASE]
    # MEMDIR_SEMANTIC=0 (tests/conftest.py sets it) turns it off when nothing is passed.
    with PostgresStore(pgvector_dsn, schema=vschema) as env_off:
        assert not env_off.semantic and env_off.search("deployment process") == []
    monkeypatch.delenv("MEMDIR_SEMANTIC")
    with PostgresStore(pgvector_dsn, schema=vschema) as default:
        assert default.semantic and len(default.search("deployment process")) == 1
    # No pgvector: words alone, no error, whatever is asked.
    with PostgresStore(pg_support.DSN, schema=pg_store.schema, semantic=True) as plain:
        assert not plain.vectors and not plain.semantic
        plain.store(RELEASE, type="fact")
        assert plain.search("deployment process") == []
        assert [h.memory.body for h in plain.search("shipping")] == [RELEASE]


def test_team_server_answers_a_search_by_meaning(pgvector_dsn: str, home: Path,
                                                 repo: Path) -> None:
    with database_on(pgvector_dsn) as dsn, \
            running_server(home, repo, "--database", dsn, env={"MEMDIR_SEMANTIC": "1"}) as srv, \
            srv.client() as client:
        release = store_memory(client, RELEASE, type="fact")
        for text in UNRELATED:
            store_memory(client, text, type="fact")
        answer = client.get("/api/memory/search", params={"q": "deployment process"})
        assert answer.status_code == 200, answer.text
        assert [h["memory"]["id"] for h in answer.json()["hits"]][:1] == [release["id"]]
        assert client.get("/api/memory/search", params={"q": "deployment process",
                                                        "type": "preference"}
                          ).json()["hits"] == []


def test_vector_text_is_what_is_stored(vstore: PostgresStore) -> None:
    memory: Memory = vstore.store(RELEASE, type="fact", description="How we ship")
    assert memory.description == "How we ship"
    stored = vectors(vstore)[memory.id][2]
    assert cosine(vector_text(memory.name, "How we ship", memory.body), stored) > 0.999
    assert cosine(RELEASE, stored) < 0.999  # the description is part of it
