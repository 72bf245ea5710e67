"""The team scope over the network: MEMDIR_SERVER, the local mirror, writes through the API.

Two "machines" (separate homes and git repositories, the real CLI in subprocesses) share a
real `memdir serve` (tests/server_support.py), over the Markdown store or a fresh PostgreSQL
database. Misbehaving servers (hostile ids, bad tokens, hangs, redirects) are real HTTP
servers too: a small ``http.server`` in a thread of the test that answers what it is told.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conftest import git
from memdir import Memdir
from memdir.core.errors import ConfigError, InvalidMemoryError, PathTraversalError, ServerError
from pg_support import fresh_database
from server_support import Server, running_server

# -- two machines and a server ---------------------------------------------------------------


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    return path


@dataclass
class Machine:
    """One developer's machine: its own memdir home and checkout, the team server's URL."""

    home: Path
    repo: Path
    url: str
    token: str

    def env(self) -> dict[str, str]:
        return {**os.environ, "MEMDIR_HOME": str(self.home), "MEMDIR_SERVER": self.url,
                "MEMDIR_TOKEN": self.token}

    def run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memdir", *args], cwd=self.repo,
                              input=input, capture_output=True, text=True, timeout=60,
                              env=self.env())

    def json(self, *args: str) -> Any:
        result = self.run(*args, "--json")
        assert result.returncode == 0, (args, result.stderr)
        return json.loads(result.stdout)

    @property
    def mirror(self) -> Path:
        (root,) = (self.home / "remote").iterdir()
        return root / "team"

    def age_last_pull(self) -> None:
        """Make the last pull look a minute old, so the next command pulls again."""
        stamp = self.mirror.parent / "last-pull"
        past = time.time() - 60
        os.utime(stamp, (past, past))


def _machines(tmp_path: Path, server: Server) -> tuple[Machine, Machine]:
    def machine(name: str) -> Machine:
        return Machine(tmp_path / f"{name}-home", _repo(tmp_path / f"{name}-repo"), server.url,
                       server.token)

    return machine("a"), machine("b")


@pytest.fixture
def team_server(tmp_path: Path) -> Iterator[Server]:
    with running_server(tmp_path / "server-home", _repo(tmp_path / "server-repo")) as server:
        yield server


def _ids(items: list[dict[str, Any]]) -> set[str]:
    return {item["memory"]["id"] if "memory" in item else item["id"] for item in items}


def test_a_team_memory_travels_between_two_machines(tmp_path: Path, team_server: Server) -> None:
    a, b = _machines(tmp_path, team_server)
    stored = a.json("store", "--scope", "team", "--type", "feedback",
                    "Never mock the database in integration tests.")
    team_id = stored["memory"]["id"]
    assert stored["memory"]["scope"] == "team"
    assert Path(stored["memory"]["file"]).parent == a.mirror  # the mirror took the answer
    on_server = team_server.request("GET", f"/api/memory/{team_id}").json()["memory"]
    assert on_server["content"] == "Never mock the database in integration tests."

    local = b.json("store", "--type", "fact", "The integration tests database is PostgreSQL 15.")
    local_id = local["memory"]["id"]
    hits = b.json("search", "integration tests database")
    assert _ids(hits) == {team_id, local_id}
    assert {h["memory"]["scope"] for h in hits} == {"team", "project"}
    context = b.json("context")
    assert {team_id, local_id} <= {item["id"] for item in context["memories"]}
    assert "Never mock the database" in context["text"]
    recall = b.json("recall", "how do we mock the database in integration tests?",
                    "--session", "s1")
    assert team_id in json.dumps(recall)

    # B contradicts the team in a private memory: warned, with the team memory named.
    clash = b.run("store", "--type", "feedback", "Always mock the database in integration "
                  "tests to keep them fast.")
    assert clash.returncode == 0, clash.stderr
    assert f"may contradict team memory {team_id}" in clash.stderr
    clash_json = b.json("store", "--type", "feedback", "--scope", "user",
                        "Mock the database in the integration tests.")
    assert [c["id"] for c in clash_json["conflicts"]] == [team_id]

    # B archives the team memory: on the server at once, on A after A pulls.
    archived = b.json("archive", team_id)
    assert archived["status"] == "archived" and archived["id"] == team_id
    assert team_server.request("GET", f"/api/memory/{team_id}").json()["memory"][
        "status"] == "archived"
    assert "Never mock the database" in a.json("context")["text"]  # pulled seconds ago
    pulled = a.json("team", "pull")
    assert pulled["total"] == 1 and pulled["refused"] == []
    assert "Never mock the database" not in a.json("context")["text"]
    assert [m["id"] for m in a.json("list", "--scope", "team", "--status", "archived")] == [
        team_id]

    # A restores and edits it; B deletes it; each change reaches the other side.
    a.json("restore", team_id)
    edited = a.json("update", team_id, "--tags", "testing,database")
    assert edited["tags"] == ["testing", "database"] and edited["scope"] == "team"
    assert a.json("update", team_id, "--reinforce")["reinforced"] == 1
    b.run("team", "pull")
    assert b.json("get", team_id)["tags"] == ["testing", "database"]
    moved = b.json("reclassify", team_id, "policy")
    assert moved["type"] == "policy" and Path(moved["file"]).name.startswith("policy_")
    assert [p.name for p in b.mirror.glob("*.md") if p.name != "MEMORY.md"] == [
        Path(moved["file"]).name]  # the old file name went with the rename
    b.json("delete", team_id)
    assert team_server.request("GET", f"/api/memory/{team_id}").status_code == 404
    a.json("team", "pull")
    assert a.json("list", "--scope", "team", "--status", "all") == []
    status = a.json("team", "status")
    assert status["url"] == team_server.url and status["reachable"] is True
    assert status["last_pull"]["ok"] is True and status["active"] == 0


def test_two_machines_share_a_postgresql_team_server(tmp_path: Path) -> None:
    with fresh_database() as dsn, running_server(
            tmp_path / "server-home", _repo(tmp_path / "server-repo"), "--database", dsn) as server:
        a, b = _machines(tmp_path, server)
        team_id = a.json("store", "--scope", "team", "--type", "decision",
                         "Orders are stored in PostgreSQL, not in Redis.")["memory"]["id"]
        b.json("store", "--type", "fact", "Redis only caches sessions.")
        assert [h["memory"]["id"] for h in b.json("search", "orders postgresql")] == [team_id]
        assert {m["scope"] for m in b.json("list")} == {"team", "project"}
        b.json("reclassify", team_id, "fact")
        a.json("team", "pull")
        (mirrored,) = a.json("list", "--scope", "team")
        assert (mirrored["id"], mirrored["type"]) == (team_id, "fact")
        assert Path(mirrored["file"]).name.startswith("fact_")


def test_without_the_server_a_machine_keeps_working_from_the_mirror(tmp_path: Path) -> None:
    with running_server(tmp_path / "server-home", _repo(tmp_path / "server-repo")) as server:
        a, b = _machines(tmp_path, server)
        team_id = a.json("store", "--scope", "team", "--type", "policy",
                         "Deploy to production only from the release branch.")["memory"]["id"]
        b.json("team", "pull")
        b.json("store", "--type", "fact", "Production deploys take about ten minutes.")
    # The server is gone now.
    for machine in (a, b):
        machine.age_last_pull()  # so the next command tries the server, and fails
    result = b.run("search", "deploy production")
    assert result.returncode == 0, result.stderr
    assert team_id in result.stdout
    assert "team memories not updated" in result.stderr and "memdir serve" in result.stderr
    assert b.json("context")["count"] == 2

    b.age_last_pull()
    payload = json.dumps({"session_id": "s1", "cwd": str(b.repo), "source": "startup"})
    started = time.monotonic()
    hook = subprocess.run([sys.executable, "-m", "memdir", "hook", "session-start"],
                          input=payload, capture_output=True, text=True, timeout=30,
                          env=b.env(), cwd=b.repo)
    assert hook.returncode == 0
    assert time.monotonic() - started < 5.0
    assert "Deploy to production only from the release branch." in hook.stdout

    # Writes to the team scope need the server: refused with a hint, nothing changed.
    before = sorted(p.name for p in a.mirror.iterdir())
    refused = a.run("store", "--scope", "team", "--type", "fact", "Staging runs Debian 12.")
    assert refused.returncode == 1
    assert "cannot reach the team server" in refused.stderr and "hint:" in refused.stderr
    assert "memdir serve" in refused.stderr
    assert sorted(p.name for p in a.mirror.iterdir()) == before
    assert a.run("archive", team_id).returncode == 1
    assert a.json("get", team_id)["status"] == "active"
    failed = a.run("team", "pull")
    assert failed.returncode == 1 and "MEMDIR_SERVER" in failed.stderr
    status = a.run("team", "status", "--json")
    assert status.returncode == 1
    assert json.loads(status.stdout)["last_pull"]["ok"] is False
    # Private memories never needed the server.
    assert a.json("store", "--type", "fact", "Staging runs Debian 12.")["memory"]["scope"] == (
        "project")


# -- a server the test controls ----------------------------------------------------------------

MEMORY = {"name": "Build host", "description": "The build runs on Debian.", "type": "fact",
          "scope": "team", "relevance": 0.5, "tags": [], "paths": [], "source": "manual",
          "created": "2026-01-02T03:04:05Z", "updated": "2026-01-02T03:04:05Z",
          "reinforced": 0, "status": "active", "superseded_by": None, "meta": {},
          "content": "The build runs on Debian.", "file": None, "access_count": 0,
          "last_accessed": None}


@dataclass
class Stub:
    """Answers for (method, path without query): (status, JSON or raw bytes, headers)."""

    routes: dict[tuple[str, str], tuple[int, Any, dict[str, str]]] = field(default_factory=dict)
    seen: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, auth
    url: str = ""
    delay: float = 0.0  # seconds before each answer: a server that hangs

    def answer(self, method: str, path: str, body: Any, status: int = 200,
               headers: dict[str, str] | None = None) -> None:
        self.routes[(method, path)] = (status, body, headers or {})

    def count(self, method: str, path: str) -> int:
        return sum(1 for m, p, _ in self.seen if (m, p.split("?")[0]) == (method, path))


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            state.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
            time.sleep(state.delay)
            status, body, headers = state.routes.get(
                (self.command, self.path.split("?")[0]),
                (404, {"error": {"code": "not_found", "message": "no route", "hint": "h"}}, {}))
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _reply  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def client_env(monkeypatch: pytest.MonkeyPatch, stub: Stub) -> Stub:
    monkeypatch.setenv("MEMDIR_SERVER", stub.url)
    monkeypatch.setenv("MEMDIR_TOKEN", "s3cret-token")
    return stub


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_hostile_ids_and_names_cannot_leave_the_mirror(tmp_path: Path, home: Path, repo: Path,
                                                       client_env: Stub) -> None:
    hostile = [
        {**MEMORY, "id": "good1"},
        {**MEMORY, "id": "../../../evil"}, {**MEMORY, "id": ".."}, {**MEMORY, "id": "a/b"},
        {**MEMORY, "id": "%2e%2e%2fevil"}, {**MEMORY, "id": "x\u2215y"},
        {**MEMORY, "id": "/etc/passwd"}, {**MEMORY, "id": "evil\\..\\x"},
        {**MEMORY, "id": "good2", "type": "../../evil"},
        {**MEMORY, "id": "good3", "name": "../../../evil", "file": str(tmp_path / "evil.md"),
         "meta": {"id": "../../z", "path": "/etc", "ok": 1}},
        {**MEMORY, "id": "good1", "content": "A second memory with the same id."},
        "not an object",
    ]
    client_env.answer("GET", "/api/memory", {"memories": hostile})
    before = _files(tmp_path)
    with Memdir(home=home, project=repo, sync_interval=0) as md:
        report = md.pull_team()
        assert report is not None
        mirror = md.directory("team").path
        assert mirror.parent.parent == home / "remote"
        assert sorted(report.written) == ["fact_build-host-good1.md", "fact_evil-good3.md"]
        assert len(report.refused) == len(hostile) - 2
        memories = {m.id: m for m in md.list(scopes=["team"])}
        new = _files(tmp_path) - before
        assert all(p.is_relative_to(mirror.parent) or p.name.startswith("index.sqlite")
                   for p in new), new
        assert not (tmp_path / "evil.md").exists()
        assert set(memories) == {"good1", "good3"}
        assert dict(memories["good3"].meta) == {"path": "/etc", "ok": 1}  # no "id" posing
        assert md.get("good3").path == mirror / "fact_evil-good3.md"

        # A write whose answer carries a hostile id writes nothing either.
        client_env.answer("POST", "/api/memory/store",
                          {"memory": {**MEMORY, "id": "../../../evil2"}, "conflicts": []}, 201)
        with pytest.raises(PathTraversalError):
            md.store("The build runs on Debian 13.", type="fact", scope="team")
        assert _files(tmp_path) - before == new
        assert not [p for p in _files(tmp_path) if "evil2" in str(p)]
    assert client_env.seen[0][2] == "Bearer s3cret-token"


def test_pulls_are_throttled_per_home(home: Path, repo: Path, client_env: Stub,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    client_env.answer("GET", "/api/memory", {"memories": [{**MEMORY, "id": "m1"}]})
    with Memdir(home=home, project=repo) as md:
        assert [m.id for m in md.list(scopes=["team"])] == ["m1"]
    with Memdir(home=home, project=repo) as md:  # a second process, seconds later
        md.search("build")
    cli = subprocess.run([sys.executable, "-m", "memdir", "search", "build", "--json"],
                         cwd=repo, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "MEMDIR_HOME": str(home)})
    assert cli.returncode == 0, cli.stderr
    assert [h["memory"]["id"] for h in json.loads(cli.stdout)] == ["m1"]
    assert client_env.count("GET", "/api/memory") == 1

    client_env.answer("GET", "/api/memory", {"memories": []})  # m1 was deleted
    with Memdir(home=home, project=repo) as md:
        stamp = md.directory("team").path.parent / "last-pull"
        os.utime(stamp, (time.time() - 31, time.time() - 31))
        assert md.list(scopes=["team"]) == []
        assert client_env.count("GET", "/api/memory") == 2
        assert md.pull_team() is not None  # forced: no throttle
        assert client_env.count("GET", "/api/memory") == 3


def test_a_hanging_server_costs_a_hook_about_a_second(home: Path, repo: Path,
                                                     client_env: Stub) -> None:
    client_env.answer("GET", "/api/memory", {"memories": [
        {**MEMORY, "id": "p1", "type": "policy", "relevance": 1.0,
         "content": "Release only from tagged commits."}]})
    with Memdir(home=home, project=repo) as md:
        assert [m.id for m in md.list(scopes=["team"])] == ["p1"]
        stamp = md.directory("team").path.parent / "last-pull"
    os.utime(stamp, (time.time() - 60, time.time() - 60))
    client_env.delay = 8.0
    payload = json.dumps({"session_id": "s1", "cwd": str(repo)})
    started = time.monotonic()
    hook = subprocess.run([sys.executable, "-m", "memdir", "hook", "session-start"],
                          input=payload, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "MEMDIR_HOME": str(home)}, cwd=repo)
    elapsed = time.monotonic() - started
    assert hook.returncode == 0
    assert "Release only from tagged commits." in hook.stdout
    assert elapsed < 4.0, elapsed  # the pull's timeout (1 s), not the server's 8 s
    assert client_env.count("GET", "/api/memory") == 2
    assert "timed out" in (home / "remote").joinpath(
        stamp.parent.name, "last-pull").read_text()


def test_server_errors_come_back_with_hints(home: Path, repo: Path, client_env: Stub,
                                            caplog: pytest.LogCaptureFixture) -> None:
    unauthorized = {"error": {"code": "unauthorized", "message": "bad token", "hint": "x"}}
    client_env.answer("GET", "/api/memory", unauthorized, 401)
    with Memdir(home=home, project=repo) as md:
        with caplog.at_level(logging.WARNING, logger="memdir"):
            assert md.search("anything") == []  # the pull failed quietly: a warning
        assert "refused the token" in caplog.text and "MEMDIR_TOKEN" in caplog.text
        with pytest.raises(ServerError) as info:
            md.pull_team()
        assert "--show-token" in info.value.hint

        refusal = {"error": {"code": "secret_detected", "message": "a secret",
                             "hint": "remove the secret"}}
        client_env.answer("POST", "/api/memory/store", refusal, 422)
        with pytest.raises(InvalidMemoryError) as refused:
            md.store("The build runs on Debian.", type="fact", scope="team")
        assert refused.value.code == "secret_detected"
        assert refused.value.hint == "remove the secret"

        client_env.answer("GET", "/api/memory", b"<html>a proxy page</html>")
        with pytest.raises(ServerError, match="not JSON"):
            md.pull_team()

        # A redirect is not followed: the token must not travel to another host.
        client_env.answer("GET", "/api/memory", b"", 302, {"Location": "/elsewhere"})
        with pytest.raises(ServerError, match="HTTP 302"):
            md.pull_team()
        assert client_env.count("GET", "/elsewhere") == 0
        assert md.list(scopes=["team"]) == []


def test_only_trusted_settings_choose_the_server(home: Path, repo: Path, stub: Stub,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / ".memdir").mkdir()
    (repo / ".memdir" / "config.toml").write_text(f'[server]\nurl = "{stub.url}"\n')
    with Memdir(home=home, project=repo) as md:
        assert md.server is None
        assert md.directory("team").path == repo / ".memdir" / "team"
        assert any(p.kind == "untrusted-setting" and "server.url" in p.message
                   for p in md.doctor())
        md.store("Team memory in the repository.", type="fact", scope="team")
    assert stub.seen == []

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[server]\nurl = "{stub.url}/"\ntoken = "from-file"\n')
    stub.answer("GET", "/api/memory", {"memories": [{**MEMORY, "id": "m1"}]})
    with Memdir(home=home, project=repo) as md:
        assert md.server is not None and md.server.url == stub.url
        assert [m.id for m in md.list(scopes=["team"])] == ["m1"]
    assert stub.seen[-1][2] == "Bearer from-file"

    monkeypatch.setenv("MEMDIR_SERVER", "off")
    with Memdir(home=home, project=repo) as md:
        assert md.server is None
    monkeypatch.setenv("MEMDIR_SERVER", "ftp://example.com")
    with pytest.raises(ConfigError, match="not an http"):
        Memdir(home=home, project=repo)
    monkeypatch.setenv("MEMDIR_SERVER", stub.url)
    with Memdir(home=home, project=repo, remote=False) as md:  # a server's own store
        assert md.server is None


def test_no_network_code_loads_without_a_server(home: Path, repo: Path) -> None:
    code = ("import sys\nfrom memdir import Memdir\n"
            f"md = Memdir(project={str(repo)!r})\nmd.context(); md.search('x')\n"
            "print(sorted(m for m in ('urllib.request', 'http.client', 'memdir.team.mirror', "
            "'socket') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "MEMDIR_HOME": str(home)}).stdout
    assert out.strip() == "[]"
    assert not (home / "remote").exists()


def test_consolidation_leaves_the_servers_team_memories_alone(home: Path, repo: Path,
                                                              client_env: Stub) -> None:
    old = {**MEMORY, "id": "old1", "relevance": 0.3, "created": "2024-01-02T03:04:05Z",
           "updated": "2024-01-02T03:04:05Z"}
    client_env.answer("GET", "/api/memory", {"memories": [old]})
    with Memdir(home=home, project=repo) as md:
        (mirrored,) = md.list(scopes=["team"])
        assert mirrored.path is not None
        plan = md.consolidate(dry_run=True, use_llm=False)
        assert not [op for op in plan.operations if "old1" in op.memories]
        # The same memory as a private one is weak enough to be archived: the plan would
        # have touched it, and through the API, everybody's copy.
        project = md.directory("project").path
        project.mkdir(parents=True, exist_ok=True)
        text = mirrored.path.read_text().replace("scope: team", "scope: project")
        (project / "fact_build-host.md").write_text(text.replace("id: old1", "id: old2"))
        md.reconcile()
        plan = md.consolidate(dry_run=True, use_llm=False)
        assert [op.op for op in plan.operations if "old2" in op.memories] == ["archive"]
    assert client_env.count("PATCH", "/api/memory/old1") == 0
