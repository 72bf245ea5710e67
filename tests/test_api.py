"""The HTTP API (docs/api.md) over a real `memdir serve` subprocess: the memory life cycle,
context, extraction, refusals, the PostgreSQL store, concurrent clients. (Auth, body limits,
traversal and other guards: test_api_guard.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memdir.core.markdown import parse
from server_support import Server, assert_error, raw_request, running_server, store_memory


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def test_memory_life_cycle_through_the_api(api: httpx.Client, server: Server) -> None:
    created = api.post("/api/memory/store", json={
        "content": "Integration tests hit the real database, never mocks",
        "type": "feedback", "tags": ["testing"], "relevance": "high"})
    assert created.status_code == 201
    body = created.json()
    assert set(body) == {"memory", "conflicts"} and isinstance(body["conflicts"], list)
    memory = body["memory"]
    assert memory["type"] == "feedback" and memory["tags"] == ["testing"]
    assert memory["relevance"] == 0.8 and memory["status"] == "active"
    path = Path(memory["file"])
    assert path.is_file() and "real database" in path.read_text()

    hits = api.get("/api/memory/search", params={"q": "database mocks"}).json()
    assert hits["query"] == "database mocks"
    assert [h["memory"]["id"] for h in hits["hits"]] == [memory["id"]]

    got = api.get(f"/api/memory/{memory['id']}").json()["memory"]
    assert got["content"].startswith("Integration tests hit the real database")
    listed = api.get("/api/memory").json()["memories"]
    assert [m["access_count"] for m in listed] == [got["access_count"]] and \
        got["access_count"] >= 1

    patched = api.patch(f"/api/memory/{memory['id']}", json={
        "content": "Integration tests use the real PostgreSQL instance", "tags": ["db"]})
    assert patched.status_code == 200, patched.text
    assert set(patched.json()) == {"memory", "conflicts"}
    on_disk = parse(path.read_text(), stem=path.stem)
    assert "real PostgreSQL instance" in on_disk.body and on_disk.tags == ("db",)

    moved = api.patch(f"/api/memory/{memory['id']}", json={"type": "policy"}).json()["memory"]
    assert moved["id"] == memory["id"] and moved["type"] == "policy"
    assert not path.exists() and Path(moved["file"]).name.startswith("policy_")
    path = Path(moved["file"])

    archived = api.patch(f"/api/memory/{memory['id']}", json={"status": "archived"})
    assert archived.json()["memory"]["status"] == "archived"
    assert "status: archived" in path.read_text()
    assert api.get("/api/memory/context").json()["memories"] == []
    assert api.get("/api/memory", params={"status": "archived"}).json()["memories"]
    restored = api.post(f"/api/memory/{memory['id']}/restore").json()["memory"]
    assert restored["status"] == "active" and "status: active" in path.read_text()
    assert api.post(f"/api/memory/{memory['id']}/archive").json()["memory"]["status"] == \
        "archived"

    deleted = api.delete(f"/api/memory/{memory['id']}").json()
    assert deleted["deleted"] is True and deleted["memory"]["id"] == memory["id"]
    assert not path.exists()
    error = assert_error(api.get(f"/api/memory/{memory['id']}"), 404, "not_found")
    assert "memdir list" in error["hint"]
    assert_error(api.delete(f"/api/memory/{memory['id']}"), 404, "not_found")


def test_context_groups_by_type_limits_and_counts_accesses(api: httpx.Client) -> None:
    ids = [store_memory(api, f"Preference number {n}: use tool{n} for task{n}", relevance=0.9)["id"]
           for n in range(6)]
    ids += [store_memory(api, f"Policy {n}: every change{n} needs review{n}", "policy")["id"]
            for n in range(2)]
    context = api.get("/api/memory/context", params={"budget": 5000}).json()
    assert context["count"] == len(context["memories"]) == 5  # seed 000's default
    assert sum(len(v) for v in context["groups"].values()) == 5
    for item in context["memories"]:
        assert item["id"] in context["groups"][item["type"]]
    assert "5 memories loaded:" in context["text"]
    everything = api.get("/api/memory/context", params={"limit": 20, "budget": 5000}).json()
    assert everything["count"] == 8 and set(everything["groups"]) == {"preference", "policy"}
    assert sorted(everything["groups"]["policy"]) == sorted(ids[6:])
    for bad in (21, 0, -1):
        error = assert_error(api.get("/api/memory/context", params={"limit": bad}), 400,
                             "bad_request")
        assert "limit" in error["message"]
    counts = {m["id"]: m["access_count"] for m in api.get("/api/memory").json()["memories"]}
    injected_once = {item["id"] for item in context["memories"]}
    for memory_id in ids:
        assert counts[memory_id] == 1 + (memory_id in injected_once), (memory_id, counts)
    as_json = api.get("/api/memory/context", params={"format": "json"}).json()
    assert as_json["format"] == "json" and json.loads(as_json["text"])["count"] == 5


def test_extract_stores_a_preference_stated_in_a_transcript(api: httpx.Client) -> None:
    plain = "user: I prefer pnpm over npm for installing packages\nassistant: Noted.\n"
    dry = api.post("/api/memory/extract", json={"transcript": plain, "dry_run": True}).json()
    assert [i["action"] for i in dry["items"]] == ["would-store"]
    assert api.get("/api/memory").json()["memories"] == []
    report = api.post("/api/memory/extract", json={"transcript": plain}).json()
    assert report["method"] == "rules"
    [item] = report["items"]
    assert item["action"] == "stored" and item["type"] == "preference"
    found = api.get("/api/memory/search", params={"q": "pnpm"}).json()["hits"]
    assert [h["memory"]["id"] for h in found] == [item["id"]]

    lines = "\n".join(json.dumps(line) for line in [
        {"type": "user", "sessionId": "s-9", "message": {
            "role": "user", "content": "Always use ruff for linting in this repo"}},
        {"type": "assistant", "sessionId": "s-9", "message": {
            "role": "assistant", "content": [{"type": "text", "text": "Will do."}]}}])
    jsonl = api.post("/api/memory/extract", json={"transcript": lines}).json()
    assert jsonl["session_id"] == "s-9" and jsonl["items"][0]["action"] == "stored"
    messages = api.post("/api/memory/extract", json={"messages": [
        {"role": "user", "content": "Never use sudo pip install on the build machines"}]})
    assert messages.status_code == 200 and messages.json()["items"][0]["action"] == "stored"
    assert_error(api.post("/api/memory/extract", json={}), 400, "bad_request")
    assert_error(api.post("/api/memory/extract", json={"transcript": plain, "messages": []}),
                 400, "bad_request")


def test_bad_requests_get_the_error_shape(api: httpx.Client) -> None:
    json_header = {"Content-Type": "application/json"}
    error = assert_error(api.post("/api/memory/store", content=b'{"content": "x", ',
                                  headers=json_header), 400, "bad_request")
    assert "JSON" in error["message"]
    for body, field in (({"content": "x", "type": "fact", "tags": "a,b"}, "tags"),
                        ({"content": "x", "type": "fact", "relevance": "hot"}, "relevance"),
                        ({"content": "x", "type": "fact", "relevance": 1.5}, "relevance"),
                        ({"content": 3, "type": "fact"}, "content"),
                        ({"type": "fact"}, "content"),
                        ({"content": "x", "type": "fact", "colour": "red"}, "colour"),
                        ({"content": "x", "type": "fact", "scope": "galaxy"}, "scope")):
        error = assert_error(api.post("/api/memory/store", json=body), 400, "bad_request")
        assert field in error["message"], (body, error)
    error = assert_error(api.post("/api/memory/store", content=b"content=x"), 400, "bad_request")
    assert "application/json" in error["hint"]
    for params in ({"q": "x", "limit": "ten"}, {"q": "x", "limit": 101}, {},
                   {"q": "x", "scope": "galaxy"}):
        assert_error(api.get("/api/memory/search", params=params), 400, "bad_request")
    assert_error(api.get("/api/memory", params={"status": "gone"}), 400, "bad_request")
    memory_id = store_memory(api, "Prefers short commit messages")["id"]
    assert_error(api.patch(f"/api/memory/{memory_id}", json={}), 400, "bad_request")
    assert_error(api.patch(f"/api/memory/{memory_id}", json={"status": "deleted"}), 400,
                 "bad_request")
    error = assert_error(api.post("/api/memory/store", json={"content": "x", "type": "gizmo"}),
                         422, "unknown_type")
    assert "preference" in error["hint"]
    error = assert_error(api.patch(f"/api/memory/{memory_id}", json={"type": "gizmo"}), 422,
                         "unknown_type")


def test_secrets_are_refused_with_a_hint(api: httpx.Client, server: Server) -> None:
    key = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
    error = assert_error(api.post("/api/memory/store", json={
        "content": f"The deploy key is {key}", "type": "fact"}), 422, "secret_detected")
    assert "secret" in error["hint"] and key not in json.dumps(error)
    memory_id = store_memory(api, "Deploys go out on Tuesdays", "fact")["id"]
    before = Path(api.get("/api/memory").json()["memories"][0]["file"]).read_text()
    for change in ({"content": f"key {key}"}, {"content": f"key {key}", "type": "decision"},
                   {"description": f"uses {key}", "status": "archived"}):
        assert_error(api.patch(f"/api/memory/{memory_id}", json=change), 422, "secret_detected")
    after = api.get("/api/memory").json()["memories"]
    assert [(m["type"], m["status"]) for m in after] == [("fact", "active")]
    assert Path(after[0]["file"]).read_text() == before
    assert key not in "".join(p.read_text(errors="replace") for p in server.home.rglob("*")
                              if p.is_file() and p.suffix in (".md", ".log"))


def test_the_same_api_over_postgresql(home: Path, repo: Path) -> None:
    from pg_support import fresh_database

    with fresh_database() as url, \
            running_server(home, repo, env={"MEMDIR_DATABASE": url}) as srv, \
            srv.client() as api:
        assert api.get("/healthz").json()["store"] == "postgresql"
        memory = store_memory(api, "The staging database is rebuilt every Sunday night", "fact",
                       scope="team")
        assert memory["scope"] == "team" and memory["file"] is None
        assert not list(home.rglob("*.md"))  # in the database, not in files
        hits = api.get("/api/memory/search", params={"q": "staging rebuilt"}).json()["hits"]
        assert [h["memory"]["id"] for h in hits] == [memory["id"]]
        context = api.get("/api/memory/context", params={"budget": 2000}).json()
        assert context["groups"] == {"fact": [memory["id"]]}
        patched = api.patch(f"/api/memory/{memory['id']}",
                            json={"type": "decision", "status": "archived"}).json()["memory"]
        assert (patched["type"], patched["status"]) == ("decision", "archived")
        stats = api.get("/api/memory/stats").json()
        assert stats["total"] == 1 and stats["by_age"]["today"] == 1
        said = "user: Always run the migrations in a transaction\nassistant: Will do.\n"
        report = api.post("/api/memory/extract", json={"transcript": said, "scope": "team"})
        [item] = report.json()["items"]
        assert report.status_code == 200 and item["action"] == "stored"
        again = api.post("/api/memory/extract", json={"transcript": said, "scope": "team"})
        assert again.json()["items"][0]["action"] == "reinforced"  # one row, not two
        assert api.get(f"/api/memory/{item['id']}").json()["memory"]["reinforced"] == 1
        assert_error(raw_request(srv, "GET", "/api/memory/..%5Cx"), 400, "path_traversal")
        assert api.delete(f"/api/memory/{memory['id']}").json()["deleted"] is True
        assert_error(api.get(f"/api/memory/{memory['id']}"), 404, "not_found")


def test_concurrent_requests_each_get_a_whole_answer(api: httpx.Client, server: Server) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def work(n: int) -> tuple[int, int]:
        with server.client() as client:
            stored = client.post("/api/memory/store", json={
                "content": f"Service {n} deploys with blue-green switch{n}", "type": "fact"})
            found = client.get("/api/memory/search", params={"q": f"switch{n}"})
            return stored.status_code, len(found.json()["hits"])

    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(work, range(36)))
    assert results == [(201, 1)] * 36
    memories = api.get("/api/memory").json()["memories"]
    assert len({m["id"] for m in memories}) == 36
    assert all(Path(m["file"]).is_file() for m in memories)
