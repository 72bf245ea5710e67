"""The team server under load: two `memdir serve --database` processes on one PostgreSQL
database, eight clients storing and searching through both at once for 30 seconds.

Afterwards every memory a client was told it stored exists exactly once, every exact
duplicate (the same content stored by several clients through either server) is one row
whose ``reinforced`` counts the extra stores, and both servers answer the same. Nothing is
mocked: real uvicorn subprocesses, real HTTP on 127.0.0.1, the real PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest

from pg_support import fresh_database
from server_support import Server, running_server

CLIENTS = 8
DURATION = 30.0
SHARED = [f"Shared convention number {n}: run the linter before every push" for n in range(5)]


def _client(n: int, servers: list[Server], stop: float, stored: list[tuple[str, str]],
            shared: Counter[str], errors: list[str], lock: threading.Lock) -> None:
    clients = [s.client(timeout=30.0) for s in servers]
    i = 0
    try:
        while time.monotonic() < stop:
            client = clients[(n + i) % len(clients)]  # alternate servers
            i += 1
            if i % 5 == 0:  # the same content from every client: one row, reinforced
                content = SHARED[i % len(SHARED)]
            else:
                content = f"Client {n} fact {i}: service s{n}x{i} listens on port {8000 + i}"
            r = client.post("/api/memory/store", json={"content": content, "type": "fact",
                                                       "scope": "team", "tags": [f"c{n}"]})
            if r.status_code != 201:
                with lock:
                    errors.append(f"store {r.status_code}: {r.text[:200]}")
                continue
            memory = r.json()["memory"]
            with lock:
                if content in SHARED:
                    shared[content] += 1
                else:
                    stored.append((memory["id"], content))
            if i % 3 == 0 and content not in SHARED:
                q = client.get("/api/memory/search", params={"q": f"service s{n}x{i}"})
                if q.status_code != 200:
                    with lock:
                        errors.append(f"search {q.status_code}: {q.text[:200]}")
                elif memory["id"] not in [h["memory"]["id"] for h in q.json()["hits"]]:
                    with lock:  # read-your-write, even through the other server
                        errors.append(f"search missed {memory['id']} ({content!r})")
    finally:
        for c in clients:
            c.close()


@pytest.mark.slow
def test_two_servers_eight_clients_lose_and_duplicate_nothing(tmp_path: Path,
                                                              repo: Path) -> None:
    home = tmp_path / "server-home"  # both servers share the token file of one home
    with fresh_database() as dsn, \
            running_server(home, repo, "--database", dsn) as one, \
            running_server(home, repo, "--database", dsn) as two:
        assert one.token == two.token
        stored: list[tuple[str, str]] = []
        shared: Counter[str] = Counter()
        errors: list[str] = []
        lock = threading.Lock()
        stop = time.monotonic() + DURATION
        threads = [threading.Thread(target=_client,
                                    args=(n, [one, two], stop, stored, shared, errors, lock))
                   for n in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=DURATION + 120)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        assert len(stored) > 100  # the run really did something

        # Counted afterwards, in the database itself.
        with psycopg.connect(dsn) as conn:
            rows = conn.execute("SELECT id, body, reinforced FROM memdir.memories").fetchall()
        by_body = Counter(body for _, body, _ in rows)
        assert [b for b, count in by_body.items() if count > 1] == []  # no duplicates
        ids = {memory_id for memory_id, _, _ in rows}
        assert len(ids) == len(rows)
        bodies = {body: reinforced for _, body, reinforced in rows}
        for memory_id, content in stored:  # nothing lost
            assert memory_id in ids
            assert content in bodies
        assert len({i for i, _ in stored}) == len(stored)  # every store made a new memory
        for content, times in shared.items():  # one row, every extra store counted
            assert bodies[content] == times - 1
        assert len(rows) == len(stored) + len(shared)

        # Both servers see the same store.
        counts = [s.request("GET", "/api/memory/stats").json()["total"] for s in (one, two)]
        assert counts == [len(rows), len(rows)]
        with httpx.Client(base_url=two.url, headers=two.headers) as c:
            first = stored[0][0]
            assert c.get(f"/api/memory/{first}").json()["memory"]["id"] == first
