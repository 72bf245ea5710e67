"""The background vector worker: searches never embed memories (only the query), the worker
fills the vectors after writes and searches, survives a failing embedder, stats and doctor
count the memories still without a vector, and the long-lived servers answer with FTS while
their model loads.

The embedder is a counting fake (the Embedder protocol: hashed word counts, unit length) that
records which thread embedded which texts, and can hold the worker back at a gate, so that
"before the worker ran" is a state the test controls, not a race. The servers are real
subprocesses whose model load waits for a gate file the test creates.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import pytest
from mcp import Client, StdioServerParameters, stdio_client
from mcp.types import TextContent

from conftest import CLI, cli_json
from hook_support import wait_until
from memdir import Memdir
from server_support import free_port, stop, wait_healthy

MEANING = "what is our deployment process"  # no word in common with the memory below
DEPLOY = "CI/CD considerations: pipelines run on self-hosted runners"


def _searching(thread: str) -> bool:
    """A search's own call: on the caller's thread, or the thread a hybrid search embeds its
    query in while its SQL runs (memdir.retrieval.vector_worker.embed_aside)."""
    return thread in (threading.main_thread().name, "memdir-query")


class CountingEmbedder:
    """A fake embedder: every call recorded as (thread name, texts); the worker's calls wait
    at ``gate`` while it is closed (a search's never do); ``fail`` makes every call raise."""

    name = "counting-fake"
    dim = 32

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        thread = threading.current_thread()
        with self._lock:
            self.calls.append((thread.name, list(texts)))
        if not _searching(thread.name):
            assert self.gate.wait(60), "the test never opened the gate"
        if self.fail:
            raise RuntimeError("the fake embedder is broken")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
            out[row] /= max(float(np.linalg.norm(out[row])), 1e-12)
        return out

    def texts_on(self, main: bool) -> list[list[str]]:
        with self._lock:
            return [texts for name, texts in self.calls if _searching(name) == main]


@pytest.fixture
def fake() -> Iterator[CountingEmbedder]:
    embedder = CountingEmbedder()
    yield embedder
    embedder.gate.set()  # never leave the process's worker waiting


@pytest.fixture
def store(home: Path, repo: Path, fake: CountingEmbedder) -> Iterator[Memdir]:
    with Memdir(home=home, project=repo, sync_interval=0, semantic=True) as md:
        md._embedder = fake  # injected: the worker embeds with the facade's embedder
        yield md


def _items(n: int, start: int = 0) -> list[dict[str, str]]:
    return [{"content": f"Service {k} listens on port {8000 + k} behind the nginx proxy",
             "type": "fact"} for k in range(start, start + n)]


def _vectors(md: Memdir) -> int:
    return int(md.index.conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])


def test_a_search_embeds_only_its_query(store: Memdir, fake: CountingEmbedder) -> None:
    store.store_many(_items(10))
    assert store.wait_for_vectors(60) and _vectors(store) == 10
    fake.gate.clear()  # the worker may start on the next ones, but not finish them
    store.store_many(_items(5, start=10))
    queries = ["nginx proxy port", "which service listens on 8012", "proxy"]
    for query in queries:
        hits = store.search(query)
        assert hits  # BM25 finds them, with or without a vector
    assert fake.texts_on(main=True)[-3:] == [[q] for q in queries]  # the queries, nothing else
    assert all(len(texts) == 1 for texts in fake.texts_on(main=True))
    assert _vectors(store) == 10  # the new five wait for the worker, not for a search
    by_port = store.search("8012")
    assert [h.memory.body for h in by_port][:1] == [_items(1, start=12)[0]["content"]]
    fake.gate.set()
    assert store.wait_for_vectors(60) and _vectors(store) == 15
    embedded = [t for texts in fake.texts_on(main=False) for t in texts]
    assert sum("Service 12 " in t for t in embedded) >= 1  # documents: the worker's thread


def test_vectors_appear_after_the_worker_runs(store: Memdir, fake: CountingEmbedder) -> None:
    fake.gate.clear()
    store.store_many(_items(12))
    store.store("Deploys go through the blue-green pipeline", type="procedure")
    assert _vectors(store) == 0 and store.missing_vectors() == 13
    fake.gate.set()
    assert store.wait_for_vectors(60)
    assert _vectors(store) == 13 and store.missing_vectors() == 0
    rows = store.index.conn.execute("SELECT DISTINCT model FROM embeddings").fetchall()
    assert [r[0] for r in rows] == [fake.name]
    # An edit is embedded again, and only it.
    fake.calls.clear()
    memory = store.search("blue-green pipeline")[0].memory
    store.update(memory.id, content="Deploys go through the canary pipeline")
    assert store.wait_for_vectors(60)
    embedded = [t for texts in fake.texts_on(main=False) for t in texts]
    assert len(embedded) == 1 and "canary" in embedded[0]


def test_stats_and_doctor_count_memories_without_a_vector(store: Memdir,
                                                          fake: CountingEmbedder) -> None:
    fake.gate.clear()
    store.store_many(_items(5))
    stats = store.stats()
    assert stats.to_dict()["missing_vectors"] == 5
    notices = [p for p in store.doctor() if p.kind == "vectors-missing"]
    assert len(notices) == 1 and notices[0].message.startswith("5 memories")
    assert "reindex --embeddings" in notices[0].hint
    fake.gate.set()
    assert store.wait_for_vectors(60)
    assert store.stats().to_dict()["missing_vectors"] == 0
    assert not [p for p in store.doctor() if p.kind == "vectors-missing"]


def test_cli_stats_and_doctor_show_missing_vectors(cli: CLI,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cli("store", "--type", "decision", DEPLOY, check=True)
    cli("store", "--type", "fact", "The chocolate cake recipe uses dark cocoa", check=True)
    monkeypatch.delenv("MEMDIR_SEMANTIC")  # the default: on, with the extra installed
    data = cli_json(cli("stats", "--json"))
    assert isinstance(data, dict) and data["missing_vectors"] == 2  # the CLI never embeds
    assert "vectors: 2 memories without one yet" in cli("stats").stdout
    doctor = cli("doctor")
    assert "[vectors-missing]" in doctor.stdout and "2 memories" in doctor.stdout
    assert doctor.returncode == 0  # a notice, no fault
    # Said as a notice, not a problem: a CLI-only store is in its normal state.
    assert doctor.stdout.splitlines()[:2] == ["no problems found", "1 notice(s):"]
    assert "problem(s)" not in doctor.stdout and "    next: " in doctor.stdout
    cli("reindex", "--embeddings", check=True)
    assert cli_json(cli("stats", "--json"))["missing_vectors"] == 0  # type: ignore[index]
    assert "vectors-missing" not in cli("doctor").stdout
    monkeypatch.setenv("MEMDIR_SEMANTIC", "0")  # off: nothing to count
    assert cli_json(cli("stats", "--json"))["missing_vectors"] is None  # type: ignore[index]


def test_the_worker_survives_an_embedder_that_raises(store: Memdir, fake: CountingEmbedder,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    fake.fail = True
    with caplog.at_level(logging.WARNING, logger="memdir"):
        store.store_many(_items(4))
        assert not store.wait_for_vectors(60)  # done trying, and the vectors are not there
    assert any("memory vectors not computed" in r.getMessage() and "fake embedder is broken"
               in r.getMessage() for r in caplog.records)
    assert _vectors(store) == 0
    assert len(store.search("nginx proxy")) == 4  # search still works: BM25
    fake.fail = False
    store.store("Deploys go through the blue-green pipeline", type="procedure")
    assert store.wait_for_vectors(60) and _vectors(store) == 5  # the same worker, later


def test_a_memory_without_a_vector_ranks_by_words(store: Memdir, fake: CountingEmbedder) -> None:
    store.store_many(_items(6))
    assert store.wait_for_vectors(60)
    fake.gate.clear()
    new = store.store("The Kubernetes ingress config lives in deploy/ingress.yaml",
                      type="reference")
    hits = store.search("kubernetes ingress")  # its words, and no vector yet: still first
    assert hits[0].memory.id == new.id
    words = store.search("kubernetes ingress", mode="fts", touch=False)
    assert hits[0].match == pytest.approx(words[0].match)  # matched on its words alone
    assert _vectors(store) == 6


def _table(md: Memdir, name: str) -> dict[tuple[str, str], Any]:
    from memdir.retrieval.embed import from_blob

    return {(r[0], r[1]): from_blob(r[2]) for r in md.index.conn.execute(
        "SELECT dir, file, vector FROM embeddings WHERE model = ?", (name,))}


def _matches_table(md: Memdir, name: str, matrix: Any) -> bool:
    names, vectors, rows = matrix
    table = _table(md, name)
    return set(names) == set(table) and len(names) == vectors.shape[0] and all(
        np.array_equal(vectors[rows[key]], vector) for key, vector in table.items())


def test_the_matrix_takes_only_the_rows_written_since(store: Memdir,
                                                       fake: CountingEmbedder) -> None:
    from memdir.retrieval.vector_index import vector_matrix

    keys = [d.key for d in store._dirs()]
    store.store_many(_items(4))
    assert store.wait_for_vectors(60)
    first = vector_matrix(store.index, keys, fake)
    store.store_many(_items(3, start=4))
    assert store.wait_for_vectors(60)
    second = vector_matrix(store.index, keys, fake)  # appended (into a larger buffer)
    store.store_many(_items(2, start=7))
    assert store.wait_for_vectors(60)
    third = vector_matrix(store.index, keys, fake)
    assert third[0][:7] == second[0] and second[0][:4] == first[0]  # rows kept in place
    assert np.shares_memory(second[1], third[1])  # appended, not rebuilt
    assert first[1].shape[0] == 4 and second[1].shape[0] == 7  # snapshots never grow
    assert _matches_table(store, fake.name, third)
    # An edit replaces its row in a copy: a search still holding the old snapshot keeps it.
    kept = third[1].copy()
    edited = store.search("Service 5 listens")[0].memory
    store.update(edited.id, content="Service 5 moved to port 9005 behind envoy")
    assert store.wait_for_vectors(60)
    fourth = vector_matrix(store.index, keys, fake)
    assert np.array_equal(third[1], kept) and not np.shares_memory(third[1], fourth[1])
    assert fourth[0] == third[0] and _matches_table(store, fake.name, fourth)
    # A deletion cannot be appended: the matrix is rebuilt without the row.
    store.delete(edited.id)
    assert store.wait_for_vectors(60)
    fifth = vector_matrix(store.index, keys, fake)
    assert len(fifth[0]) == 8 and _matches_table(store, fake.name, fifth)
    # The newest row deleted and another written, with no search in between: the same
    # number of rows, and a seq never given before, so the matrix cannot miss it.
    newest = store.search("Service 7 listens")[0].memory
    store.update(newest.id, content="Service 7 moved to port 9007 behind envoy")
    assert store.wait_for_vectors(60)
    assert _matches_table(store, fake.name, vector_matrix(store.index, keys, fake))
    store.delete(newest.id)
    assert store.wait_for_vectors(60)
    store.store("Service 70 listens on port 8070 behind the nginx proxy", type="fact")
    assert store.wait_for_vectors(60)
    assert _matches_table(store, fake.name, vector_matrix(store.index, keys, fake))


# -- long-lived servers: FTS while the model loads ------------------------------------------


# The real server, with the model load held at a gate file: the test decides when it ends.
GATED = """
import os, sys, time
import memdir.retrieval.embed as embed

real = embed.load_embedder

def gated():
    while not os.path.exists(os.environ["MEMDIR_TEST_MODEL_GATE"]):
        time.sleep(0.01)
    return real()

embed.load_embedder = gated
from memdir.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _seed(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo, semantic=False) as md:
        md.store(DEPLOY, type="decision")
        md.store("The chocolate cake recipe uses dark cocoa", type="fact")


def test_mcp_recall_answers_with_fts_before_the_model_is_loaded(home: Path, repo: Path,
                                                                 tmp_path: Path) -> None:
    _seed(home, repo)
    gate = tmp_path / "model-gate"
    env = {k: os.environ[k] for k in ("MEMDIR_CONFIG", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
                                      "HOME", "PATH") if k in os.environ}
    env.update(MEMDIR_HOME=str(home), MEMDIR_TEST_MODEL_GATE=str(gate),
               PYTHONPATH=os.pathsep.join(sys.path))
    params = StdioServerParameters(command=sys.executable, args=["-c", GATED, "mcp"], env=env,
                                   cwd=repo)

    async def recall(client: Client, query: str) -> list[str]:
        result = await client.call_tool("memory_recall", {"query": query})
        assert not result.is_error
        text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
        return [h["body"] for h in json.loads(text)["hits"]]

    async def main() -> None:
        with (tmp_path / "mcp.stderr").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy",
                              read_timeout_seconds=30) as client:
                # The model cannot load (the gate is shut): words still find, at once.
                assert await recall(client, "self-hosted runners") == [DEPLOY]
                assert await recall(client, MEANING) == []  # meaning needs the model
                gate.touch()
                found: list[str] = []
                for _ in range(600):  # bounded: the model loads, the worker fills
                    found = await recall(client, MEANING)
                    if found:
                        break
                    await anyio.sleep(0.1)
                assert found[:1] == [DEPLOY]

    anyio.run(main)


@contextlib.contextmanager
def _gated_server(home: Path, repo: Path, gate: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_SEMANTIC": "1",
           "MEMDIR_TEST_MODEL_GATE": str(gate), "PYTHONPATH": os.pathsep.join(sys.path)}
    stderr_path = gate.with_name("serve.stderr")
    with stderr_path.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-c", GATED, "serve", "--no-token", "--port", str(port),
             "--project", str(repo)], cwd=repo, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, stderr_path, 30)
        yield url
    finally:
        stop(process)


def test_http_search_answers_with_fts_before_the_model_is_loaded(home: Path, repo: Path,
                                                                 tmp_path: Path) -> None:
    _seed(home, repo)
    gate = tmp_path / "model-gate"
    with _gated_server(home, repo, gate) as url, httpx.Client(base_url=url,
                                                              timeout=30) as client:
        def search(query: str) -> list[str]:
            answer = client.get("/api/memory/search", params={"q": query})
            assert answer.status_code == 200, answer.text
            return [h["memory"]["content"] for h in answer.json()["hits"]]

        assert search("self-hosted runners") == [DEPLOY]  # the gate is shut: FTS, at once
        assert search(MEANING) == []
        gate.touch()
        assert wait_until(lambda: search(MEANING)[:1] == [DEPLOY], 60)
