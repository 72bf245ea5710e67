"""The guards of the HTTP API over a real `memdir serve` subprocess: the token on every
route, body limits (Content-Length and chunked), traversal through ids, unknown routes and
methods, unexpected faults (logged, never shown), and the warnings of risky bindings."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_support import Server, assert_error, raw_request, running_server, store_memory

MiB = 1 << 20

ROUTES = [  # (method, path) of every /api route, with an id where one is needed
    ("GET", "/api/memory/search?q=x"), ("GET", "/api/memory/context"),
    ("POST", "/api/memory/store"), ("POST", "/api/memory/extract"),
    ("GET", "/api/memory/recall?prompt=x&session_id=s"), ("GET", "/api/memory"),
    ("GET", "/api/memory/stats"), ("GET", "/api/memory/{id}"), ("PATCH", "/api/memory/{id}"),
    ("DELETE", "/api/memory/{id}"), ("POST", "/api/memory/{id}/archive"),
    ("POST", "/api/memory/{id}/restore"),
]


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def test_every_api_route_needs_the_token(server: Server, cli: Any) -> None:
    token_file = server.home / "server.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    shown = cli("serve", "--show-token", check=True).stdout.strip()
    assert shown == server.token == token_file.read_text().strip() and len(shown) >= 40
    with server.client() as client:
        memory_id = store_memory(client, "Prefers tabs in Makefiles")["id"]
    for method, path in ROUTES:
        path = path.format(id=memory_id)
        error = assert_error(server.request(method, path, auth=False), 401, "unauthorized")
        assert "--show-token" in error["hint"]
        wrong = server.request(method, path, auth=False,
                               headers={"Authorization": f"Bearer {server.token[:-1]}x"})
        assert_error(wrong, 401, "unauthorized")
        assert wrong.headers["www-authenticate"] == "Bearer"
        basic = server.request(method, path, auth=False, headers={"Authorization": "Basic eDp4"})
        assert_error(basic, 401, "unauthorized")
    # Unknown /api routes too: no token, no route enumeration.
    assert_error(server.request("GET", "/api/nothing/here", auth=False), 401, "unauthorized")
    for method, path in ROUTES:
        right = server.request(method, path.format(id=memory_id),
                               json={"transcript": "user: hi"} if "extract" in path else None)
        assert right.status_code != 401, (method, path, right.text)
    health = server.request("GET", "/healthz", auth=False)
    assert health.json() == {"status": "ok", "store": "sqlite", "version": health.json()[
        "version"]}
    page = server.request("GET", "/", auth=False)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == "default-src 'self'"
    assert page.headers["x-content-type-options"] == "nosniff"
    stderr = server.stderr()
    assert f"#token={server.token}" in stderr and server.url in stderr


def test_oversized_bodies_are_refused(api: httpx.Client) -> None:
    content = "x" * MiB
    big = json.dumps({"content": content, "type": "fact"}).encode()
    error = assert_error(api.post("/api/memory/store", content=big,
                                  headers={"Content-Type": "application/json"}), 413,
                         "payload_too_large")
    assert "--max-body" in error["hint"]

    def chunks() -> Iterator[bytes]:
        yield b'{"content": "'
        for _ in range(20):
            yield b"y" * (64 << 10)
        yield b'", "type": "fact"}'

    chunked = api.post("/api/memory/extract", content=chunks(),
                       headers={"Content-Type": "application/json"})
    assert chunked.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in chunked.request.headers
    assert_error(chunked, 413, "payload_too_large")
    assert api.get("/api/memory").json()["memories"] == []
    # Just under the limit is read (and here refused for what it is, not for its size).
    under = json.dumps({"transcript": "user: " + "z " * ((MiB - 100) // 2)}).encode()
    assert len(under) < MiB
    ok = api.post("/api/memory/extract", content=under,
                  headers={"Content-Type": "application/json"})
    assert ok.status_code == 200, ok.text[:300]


def test_max_body_option(home: Path, repo: Path) -> None:
    with running_server(home, repo, "--max-body", "300") as srv, srv.client() as api:
        assert_error(api.post("/api/memory/store", json={"content": "a" * 300, "type": "fact"}),
                     413, "payload_too_large")
        assert store_memory(api, "b" * 200, "fact")["content"] == "b" * 200


TRAVERSALS = [
    "..%2F..%2Fvictim.md", "..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e%2f%2e%2e%2fvictim.md",
    "..%5C..%5Cvictim.md", "..%255C..%255Cvictim.md", "%252e%252e%252fvictim.md",
    "victim.md%00", "%00", "%2Fetc%2Fpasswd", "%2F..%2F..%2Fvictim.md", "..", "%2e%2e",
    "C:%5Cwindows%5Cwin.ini", "%EF%BC%8E%EF%BC%8E%EF%BC%8Fvictim.md",
    "%E2%80%A4%E2%80%A4%E2%88%95victim.md", "..%c0%af..%c0%afvictim.md",
    "%2e%2e%2f%2e%2e%2fprojects", "..%2F..%2Fuser",
]


def test_traversal_never_leaves_the_store(server: Server, home: Path) -> None:
    victim = home / "victim.md"
    victim.write_text("---\nid: victim\nname: v\ndescription: v\ntype: fact\n---\nkeep me\n")
    os.utime(victim, (1_000_000_000, 1_000_000_000))
    outside = sorted(p for p in home.parent.rglob("*") if "memdir-home" not in p.parts)
    with server.client() as client:
        store_memory(client, "Prefers small pull requests")
    for ref in TRAVERSALS:
        for method, suffix in (("GET", ""), ("PATCH", ""), ("DELETE", ""),
                               ("POST", "/archive"), ("POST", "/restore")):
            response = raw_request(server, method, f"/api/memory/{ref}{suffix}")
            assert response.status_code in (400, 404, 405), (ref, method, response.text)
            code = {400: "path_traversal", 404: "not_found", 405: "method_not_allowed"}
            if response.status_code == 400 and response.json()["error"]["code"] == "bad_request":
                continue  # PATCH without a body: refused before the id is used
            assert_error(response, response.status_code, code[response.status_code])
            assert "victim" not in response.text or "keep me" not in response.text
    back = raw_request(server, "GET", "/api/memory/..%5C..%5Cvictim.md")
    assert back.json()["error"]["code"] == "path_traversal"
    assert victim.read_text().endswith("keep me\n") and victim.stat().st_mtime == 1_000_000_000
    assert sorted(p for p in home.parent.rglob("*") if "memdir-home" not in p.parts) == outside
    memories = server.request("GET", "/api/memory").json()["memories"]
    assert [m["content"] for m in memories] == ["Prefers small pull requests"]


def test_unknown_routes_and_methods(api: httpx.Client, server: Server) -> None:
    error = assert_error(api.get("/api/memory/one/two"), 404, "not_found")
    assert "/api/memory/one/two" in error["message"]
    assert_error(server.request("GET", "/nowhere", auth=False), 404, "not_found")
    assert_error(server.request("GET", "/docs", auth=False), 404, "not_found")
    assert_error(server.request("GET", "/redoc", auth=False), 404, "not_found")
    assert_error(server.request("GET", "/static/no-such-file.js", auth=False), 404, "not_found")
    wrong = api.put("/api/memory/store", json={})
    assert_error(wrong, 405, "method_not_allowed")
    assert "POST" in wrong.headers["allow"]
    schema = server.request("GET", "/openapi.json", auth=False).json()
    assert "/api/memory/{id}" in schema["paths"] and "/docs" not in schema["paths"]
    assert "HTTPBearer" in schema["components"]["securitySchemes"]


def test_unexpected_errors_are_logged_not_shown(home: Path, repo: Path) -> None:
    with running_server(home, repo) as srv:
        # Pull the index out from under the server: a fault memdir does not expect.
        for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
            (home / name).unlink(missing_ok=True)
        (home / "index.sqlite").mkdir()
        error = assert_error(srv.request("GET", "/api/memory"), 500, "internal")
        assert "server.log" in error["hint"]
        assert srv.request("GET", "/healthz").status_code == 200
    log = (home / "logs" / "server.log").read_text()
    assert "GET /api/memory" in log and "Traceback" in log


def test_binding_warnings(home: Path, repo: Path) -> None:
    with running_server(home, repo, "--host", "0.0.0.0") as srv:
        assert srv.request("GET", "/api/memory").status_code == 200
        assert_error(srv.request("GET", "/api/memory", auth=False), 401, "unauthorized")
        assert "warning: bound to 0.0.0.0, not loopback" in srv.stderr()
    with running_server(home, repo, "--no-token") as srv:
        assert srv.request("GET", "/api/memory", auth=False).status_code == 200
        stderr = srv.stderr()
        assert "authentication is OFF" in stderr and "not loopback" not in stderr
        assert "#token=" not in stderr


def test_token_file_is_private_and_must_be_usable(home: Path, cli: Any) -> None:
    first = cli("serve", "--show-token", check=True).stdout.strip()
    token_file = home / "server.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert cli("serve", "--show-token", check=True).stdout.strip() == first
    token_file.chmod(0o644)
    again = cli("serve", "--show-token", check=True)
    assert again.stdout.strip() == first and "readable by others" in again.stderr
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token_file.write_text("short\n")
    refused = cli("serve", "--show-token")
    assert refused.returncode != 0 and "not usable" in refused.stderr
    assert f"delete {token_file}" in refused.stderr
    token_file.unlink()
    fresh = cli("serve", "--show-token", check=True).stdout.strip()
    assert fresh != first and len(fresh) >= 40
