"""The PostgreSQL store's vectors: written by the background worker (never by a search or a
write), with pgvector or in the plain table without it, and hybrid search (words and meaning
fused) with the filters and counters of plain search.

The pgvector server is a real PostgreSQL with the extension, started once per session from
the ``pgserver`` wheel (``pgvector_dsn`` in tests/pg_support.py); "no pgvector" (the
``plain_vectors`` table, ranked in this process) is the local PostgreSQL 15 of the other
PostgreSQL tests. The embedding model is the real one (the ``embed`` extra), loaded once per
process; :class:`CountingEmbedder` wraps it to count who asks it for what.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import pg_support
from memdir.core.model import Memory
from memdir.core.store import norm_hash
from memdir.retrieval.embed import MODEL_NAME, from_blob, load_embedder
from memdir.retrieval.semantic import BATCH, vector_text
from memdir.team.postgres import PostgresStore
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
    """id -> (model, norm_hash, vector as text) of every stored vector (either table)."""
    if store.vectors:
        query = "SELECT id, model, norm_hash, vector::text AS v FROM embeddings"
    else:
        query = "SELECT id, model, norm_hash, vector AS v FROM plain_vectors"
    return {r["id"]: (r["model"], r["norm_hash"], r["v"] if isinstance(r["v"], str) else
                      "[" + ",".join(map(str, from_blob(bytes(r["v"])).tolist())) + "]")
            for r in rows(store, query)}


def filled(store: PostgresStore, timeout: float = 60.0) -> dict[str, tuple[str, str, str]]:
    """Wait until the background worker has given every memory a vector of its current text
    and the model is loaded (nothing here embeds); the vectors."""
    deadline = time.monotonic() + timeout
    while True:
        found = vectors(store)
        memories = {r["id"]: r["norm_hash"] for r in rows(
            store, "SELECT id, norm_hash FROM memories")}
        if store.embeddings.model is not None and all(
                key in found and found[key][1] == hashed for key, hashed in memories.items()):
            return found
        assert time.monotonic() < deadline, "the background worker did not fill the vectors"
        time.sleep(0.02)


def cosine(text: str, vector: str) -> float:
    import numpy as np

    embedder = load_embedder()
    assert embedder is not None
    stored = np.array([float(x) for x in vector.strip("[]").split(",")], dtype=np.float32)
    return float(embedder.embed([text])[0] @ stored)


class CountingEmbedder:
    """The real model, counting its calls: (the calling thread's name, the texts). Calls from
    any thread but the test's wait while ``hold`` is clear (a worker stuck in a batch)."""

    def __init__(self) -> None:
        real = load_embedder()
        assert real is not None
        self.real, self.name, self.dim = real, real.name, real.dim
        self.calls: list[tuple[str, list[str]]] = []
        self.hold = threading.Event()
        self.hold.set()

    def embed(self, texts: Sequence[str]) -> Any:
        me = threading.current_thread()
        self.calls.append((me.name, list(texts)))
        if me is not threading.main_thread():
            assert self.hold.wait(60)
        return self.real.embed(texts)

    def by(self, main: bool) -> list[list[str]]:
        """The texts of each call from the test's thread (``main``) or from the others."""
        ours = threading.main_thread().name
        return [texts for name, texts in self.calls if (name == ours) == main]


def ids(hits: Any) -> list[str]:
    return [h.memory.id for h in hits]


def test_meaning_finds_what_words_miss(vstore: PostgresStore, pgvector_dsn: str,
                                       vschema: str, pg_store: PostgresStore) -> None:
    assert vstore.vectors and vstore.semantic
    release = vstore.store(RELEASE, type="fact")
    vstore.store_many([{"content": text, "type": "fact"} for text in UNRELATED])
    filled(vstore)
    hits = vstore.search("deployment process")
    assert ids(hits)[:1] == [release.id]
    assert hits[0].score > 0 and hits[0].strength > 0
    recalled = vstore.recall("how does our deployment process work?", "session-1")
    assert release.id in [item.memory.id for item in recalled.items]
    # The same memories searched by words alone: nothing says "deployment" or "process".
    with PostgresStore(pgvector_dsn, schema=vschema, semantic=False) as words:
        assert not words.semantic and words.vectors
        assert words.search("deployment process") == []
    # The plain PostgreSQL (no pgvector) with vectors off (MEMDIR_SEMANTIC=0): words alone.
    pg_store.store(RELEASE, type="fact")
    assert not pg_store.semantic and pg_store.embeddings.worker is None
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
    filled(vstore)
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
            filled(store)
            assert ids(store.search("deployment process")) == [release.id]


@pytest.fixture(params=["pgvector", "plain"])
def either(request: pytest.FixtureRequest) -> Iterator[tuple[PostgresStore, str]]:
    """A store with vectors on, with pgvector or in the plain table; and its DSN."""
    if request.param == "plain":
        with pg_support.fresh_schema() as name, PostgresStore(
                pg_support.DSN, schema=name, semantic=True) as store:
            assert not store.vectors
            yield store, pg_support.DSN
    else:
        dsn = request.getfixturevalue("pgvector_dsn")
        with schema_on(dsn) as name, PostgresStore(dsn, schema=name, semantic=True) as store:
            assert store.vectors
            yield store, dsn


def test_vectors_follow_the_memory(either: tuple[PostgresStore, str]) -> None:
    vstore, dsn = either
    memory = vstore.store(RELEASE, type="fact", tags=["ci"])
    model, hashed, first = filled(vstore)[memory.id]
    assert (model, hashed) == (MODEL_NAME, norm_hash(memory.body))
    assert cosine(vector_text(memory.name, memory.description, memory.body), first) > 0.999
    # Tags, type, status and reinforcement leave the text, so the vector, as it was.
    vstore.update(memory.id, tags=["ci", "release"])
    vstore.reclassify(memory.id, "decision")
    vstore.archive(memory.id)
    vstore.restore(memory.id)
    again = vstore.store(RELEASE, type="fact", name="Another name for the same content")
    assert again.id == memory.id and again.reinforced == 1
    assert filled(vstore)[memory.id] == (model, hashed, first)
    # A new body: the old vector is gone with the statement that changed it (a store with
    # vectors off wakes no worker), and the worker writes the new one.
    with PostgresStore(dsn, schema=vstore.schema, semantic=False) as words:
        changed = words.update(memory.id, content="Release pipeline: the staging soak takes 2h")
        assert memory.id not in vectors(words)
    vstore.update(memory.id, tags=["ci"])  # a write of this store: wakes its worker
    vstore.store(UNRELATED[1], type="fact")
    _, hashed2, second = filled(vstore)[memory.id]
    assert hashed2 == norm_hash(changed.body) != hashed and second != first
    assert cosine(vector_text(changed.name, changed.description, changed.body), second) > 0.999
    # A new name alone changes the text too.
    renamed = vstore.update(memory.id, name="Staging soak time")
    third = filled(vstore)[memory.id][2]
    assert third != second
    assert cosine(vector_text(renamed.name, renamed.description, renamed.body), third) > 0.999
    # Deleting the memory deletes its vector.
    vstore.delete(memory.id)
    assert memory.id not in vectors(vstore) and len(vectors(vstore)) == 1


def test_store_many_and_put_get_every_vector(either: tuple[PostgresStore, str],
                                             pg_schema: str) -> None:
    vstore, _ = either
    stored = vstore.store_many([{"content": text, "type": "fact"}
                                for text in [*UNRELATED, UNRELATED[0]]])
    assert len(stored) == len(UNRELATED) + 1 and stored[0].id == stored[-1].id
    assert set(filled(vstore)) == {m.id for m in stored}
    # put (an import) keeps the ids it is given; the worker embeds them.
    with PostgresStore(pg_support.DSN, schema=pg_schema) as plain:
        exported = plain.store_many([{"content": RELEASE, "type": "fact"},
                                     {"content": UNRELATED[1], "type": "fact"}])
    written, skipped = vstore.put(exported)
    assert [m.id for m in written] == [exported[0].id]
    assert [why for _, why in skipped] == ["same content already stored"]
    assert exported[0].id in filled(vstore)
    assert ids(vstore.search("deployment process"))[:1] == [exported[0].id]


def test_search_never_embeds_a_memory_and_never_waits_for_one(pg_schema: str) -> None:
    counting = CountingEmbedder()
    counting.hold.clear()  # the worker will wait inside its first batch
    with PostgresStore(pg_support.DSN, schema=pg_schema, semantic=True,
                       embedder=counting) as store:
        try:
            stored = store.store_many([{"content": text, "type": "fact"}
                                       for text in [RELEASE, *UNRELATED]])
            # The write returned, and searches answer, while the worker holds its batch.
            assert ids(store.search("shipping")) == [stored[0].id]
            assert store.search("deployment process") == [] and vectors(store) == {}
        finally:
            counting.hold.set()
        filled(store)
        assert ids(store.search("deployment process"))[:1] == [stored[0].id]
        assert store.embed_memories() == 0  # nothing left for anyone to embed
    # Searches asked the model for their query and nothing else; the worker embedded each
    # memory's text once, in one batch, on its own thread.
    assert counting.by(main=True) == [["shipping"], ["deployment process"],
                                      ["deployment process"]]
    documents = counting.by(main=False)
    assert len(documents) == 1
    assert sorted(documents[0]) == sorted(vector_text(m.name, m.description, m.body)
                                          for m in stored)


def test_existing_memories_are_filled_in_the_background_in_batches(
        either: tuple[PostgresStore, str]) -> None:
    vstore, dsn = either
    count = BATCH + 20
    vstore.close()
    with PostgresStore(dsn, schema=vstore.schema, semantic=False) as words:
        stored = words.store_many([{"content": f"The plant on desk {n} needs water weekly",
                                    "type": "fact"} for n in range(count - 1)])
        release = words.store(RELEASE, type="fact")
    counting = CountingEmbedder()
    with PostgresStore(dsn, schema=vstore.schema, semantic=True, embedder=counting) as store:
        # Opening starts the worker, which finds what is missing without being asked.
        assert set(filled(store)) == {m.id for m in [*stored, release]}
        assert [len(texts) for texts in counting.by(main=False)] == [BATCH, count - BATCH]
        assert counting.by(main=True) == []
        assert release.id in ids(store.search("deployment process"))
        # A store with vectors off changes the text: the trigger drops the vector; the next
        # searches see a memory without one and wake the worker, which embeds the new text.
        with PostgresStore(dsn, schema=vstore.schema, semantic=False) as words:
            words.update(release.id, content="Release pipeline: tag, build, sign, publish")
            assert release.id not in vectors(words)
        deadline = time.monotonic() + 30
        while release.id not in vectors(store):
            assert time.monotonic() < deadline, "no search woke the worker"
            store.search("how do we publish a build")
            time.sleep(0.05)
        assert vectors(store)[release.id][1] == norm_hash(
            "Release pipeline: tag, build, sign, publish")
        assert release.id in ids(store.search("how do we publish a build"))
        assert counting.by(main=True)[-1] == ["how do we publish a build"]
        assert all(len(texts) == 1 for texts in counting.by(main=True))


def test_plain_vectors_are_read_once_then_only_what_changed(
        pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from memdir.team import postgres_plain_vectors
    from memdir.team.postgres_plain_vectors import matrix_for

    with PostgresStore(pg_support.DSN, schema=pg_schema, semantic=True) as store:
        pnpm = store.store("I prefer pnpm over npm", type="preference")
        store.store_many([{"content": text, "type": "fact"} for text in UNRELATED])
        filled(store)
        assert ids(store.search("package manager"))[:1] == [pnpm.id]
        assert store.embeddings.model is not None
        matrix = matrix_for(pg_support.DSN, pg_schema, store.embeddings.model)
        assert (matrix.size, matrix.count) == (6, 6)
        top = matrix.top
        release = store.store(RELEASE, type="fact")
        filled(store)
        assert ids(store.search("deployment process"))[:1] == [release.id]
        assert matrix is matrix_for(pg_support.DSN, pg_schema, store.embeddings.model)
        assert (matrix.size, matrix.count) == (7, 7) and matrix.top > top
        # The text changes (the trigger drops its vector). Before the matrix's next full check
        # it still holds the old vector, which no search uses: the old text's meaning no
        # longer finds the memory. The check then drops it.
        with PostgresStore(pg_support.DSN, schema=pg_schema, semantic=False) as words:
            words.update(pnpm.id, content="The printer on the third floor jams on A3 paper")
        assert pnpm.id not in vectors(store)
        matrix.checked = time.monotonic()  # the last full check was just now
        assert pnpm.id not in ids(store.search("package manager"))
        assert matrix.count == 7
        monkeypatch.setattr(postgres_plain_vectors, "CHECK_INTERVAL", 0.0)
        assert pnpm.id not in ids(store.search("package manager"))
        assert matrix.count == 6 and matrix.size == 7
        store.delete(release.id)
        store.search("coffee")
        assert matrix.count == 5
        # The worker, woken by a search that saw the memory without a vector, embeds the
        # new text into the same slot.
        deadline = time.monotonic() + 30
        while pnpm.id not in vectors(store):
            assert time.monotonic() < deadline, "no search woke the worker"
            store.search("coffee")
            time.sleep(0.05)
        store.search("coffee")
        assert (matrix.size, matrix.count) == (7, 6)
        assert ids(store.search("device that fails to print sheets"))[:1] == [pnpm.id]


def test_filters_hold_in_hybrid_results(vstore: PostgresStore) -> None:
    fact = vstore.store("Deployments go through the release pipeline", type="fact",
                        tags=["ci"])
    decision = vstore.store("We decided to ship releases only on Mondays", type="decision",
                            scope="team")
    archived = vstore.store("The old deploy script pushed straight to production",
                            type="fact", tags=["ci"])
    vstore.archive(archived.id)
    vstore.store_many([{"content": text, "type": "fact"} for text in UNRELATED])
    filled(vstore)
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
    filled(vstore)
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
    filled(vstore)
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
        assert default.semantic
        filled(default)
        assert len(default.search("deployment process")) == 1
    # No pgvector: the plain table, by meaning too.
    with PostgresStore(pg_support.DSN, schema=pg_store.schema, semantic=True) as plain:
        assert not plain.vectors and plain.semantic
        plain.store(RELEASE, type="fact")
        filled(plain)
        assert [h.memory.body for h in plain.search("deployment process")] == [RELEASE]
        assert [h.memory.body for h in plain.search("shipping")] == [RELEASE]


def test_team_server_answers_a_search_by_meaning(pgvector_dsn: str, home: Path,
                                                 repo: Path) -> None:
    with database_on(pgvector_dsn) as dsn, \
            running_server(home, repo, "--database", dsn, env={"MEMDIR_SEMANTIC": "1"}) as srv, \
            srv.client() as client:
        release = store_memory(client, RELEASE, type="fact")
        for text in UNRELATED:
            store_memory(client, text, type="fact")
        # The server's worker embeds them in the background; searches answer meanwhile.
        deadline = time.monotonic() + 60
        while True:
            answer = client.get("/api/memory/search", params={"q": "deployment process"})
            assert answer.status_code == 200, answer.text
            if answer.json()["hits"]:
                break
            assert time.monotonic() < deadline, "the server never searched by meaning"
            time.sleep(0.1)
        assert [h["memory"]["id"] for h in answer.json()["hits"]][:1] == [release["id"]]
        assert client.get("/api/memory/search", params={"q": "deployment process",
                                                        "type": "preference"}
                          ).json()["hits"] == []


def test_vector_text_is_what_is_stored(vstore: PostgresStore) -> None:
    memory: Memory = vstore.store(RELEASE, type="fact", description="How we ship")
    assert memory.description == "How we ship"
    stored = filled(vstore)[memory.id][2]
    assert cosine(vector_text(memory.name, "How we ship", memory.body), stored) > 0.999
    assert cosine(RELEASE, stored) < 0.999  # the description is part of it
