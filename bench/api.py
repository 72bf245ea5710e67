"""HTTP API throughput: stores/s and searches/s through `memdir serve`, for the SQLite store
and the PostgreSQL store, with one and with two server processes.

For each configuration, fresh state (a temporary MEMDIR_HOME and project; for PostgreSQL a
temporary database on ``--database``, dropped afterwards), the servers are started as real
subprocesses on 127.0.0.1, and ``--clients`` client threads (each its own keep-alive HTTP
connection, spread over the servers) first store distinct memories for ``--seconds``, then
search them for ``--seconds``. Reported: completed requests per second and the median
latency. Clients and servers share the machine's cores, so read the numbers side by side.

Usage::

    python bench/api.py                       # sqlite and postgresql, 1 and 2 servers
    python bench/api.py --seconds 5 --clients 4 --json api.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

PG = os.environ.get("MEMDIR_TEST_DATABASE", "postgresql://postgres@127.0.0.1:5432/test")
WORDS = ("deploy cache index schema token queue worker retry timeout bucket migration "
         "replica shard lint release rollback proxy cert cron webhook").split()


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _server(home: Path, project: Path, database: str | None) -> Iterator[str]:
    port = _port()
    args = [sys.executable, "-m", "memdir", "serve", "--port", str(port), "--project",
            str(project), *(["--database", database] if database else [])]
    env = {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_SEMANTIC": "0"}
    proc = subprocess.Popen(args, env=env, cwd=project, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"memdir serve did not start: {' '.join(args)}")
            time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def _database() -> Iterator[str]:
    import psycopg

    name = f"memdir_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _phase(urls: list[str], token: str, clients: int, seconds: float,
           kind: str) -> dict[str, float]:
    latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(n: int) -> None:
        mine: list[float] = []
        with httpx.Client(base_url=urls[n % len(urls)], timeout=30,
                          headers={"Authorization": f"Bearer {token}"}) as client:
            i = 0
            while time.monotonic() < stop:
                i += 1
                started = time.perf_counter()
                if kind == "store":
                    words = " ".join(WORDS[(n * 7 + i * k) % len(WORDS)] for k in (1, 3, 5))
                    r = client.post("/api/memory/store", json={
                        "content": f"Client {n} note {i}: the {words} step runs on host h{i}",
                        "type": "fact"})
                    ok = r.status_code == 201
                else:
                    r = client.get("/api/memory/search",
                                   params={"q": f"{WORDS[i % len(WORDS)]} h{i % 500}"})
                    ok = r.status_code == 200
                mine.append(time.perf_counter() - started)
                if not ok:
                    with lock:
                        failures[0] += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    return {"per_s": len(latencies) / elapsed,
            "p50_ms": statistics.median(latencies) * 1000 if latencies else 0.0,
            "failures": failures[0]}


def bench(store: str, servers: int, clients: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memdir-bench-api-") as tmp, \
            contextlib.ExitStack() as stack:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        project.mkdir()
        database = stack.enter_context(_database()) if store == "postgresql" else None
        urls = [stack.enter_context(_server(home, project, database)) for _ in range(servers)]
        token = (home / "server.token").read_text().strip()
        stores = _phase(urls, token, clients, seconds, "store")
        searches = _phase(urls, token, clients, seconds, "search")
    return {"store": store, "servers": servers, "clients": clients,
            "stores_per_s": stores["per_s"], "store_p50_ms": stores["p50_ms"],
            "searches_per_s": searches["per_s"], "search_p50_ms": searches["p50_ms"],
            "failures": stores["failures"] + searches["failures"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--json", type=Path)
    opts = parser.parse_args(argv)
    rows = []
    for store in opts.stores.split(","):
        for servers in (1, 2):
            print(f"[bench] {store}, {servers} server(s)", file=sys.stderr, flush=True)
            rows.append(bench(store, servers, opts.clients, opts.seconds))
    print("| store | servers | stores/s | store p50 (ms) | searches/s | search p50 (ms) "
          "| failed |\n|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['store']} | {r['servers']} | {r['stores_per_s']:.0f} | "
              f"{r['store_p50_ms']:.1f} | {r['searches_per_s']:.0f} | "
              f"{r['search_p50_ms']:.1f} | {r['failures']} |")
    if opts.json:
        opts.json.write_text(json.dumps(rows, indent=2))
    return 1 if any(r["failures"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
