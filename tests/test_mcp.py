"""The MCP server: its tools and resources through the official client, in process and over a
real stdio subprocess (whose stdout must carry nothing but the protocol)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent

from conftest import CLI, cli_json
from memdir import Memdir
from memdir.agents.mcp_server import build_server
from memdir.agents.mcp_tools import run_tool

Scenario = Callable[[Client], Awaitable[None]]
TOOLS = {"memory_learn", "memory_recall", "memory_context", "memory_episode",
         "memory_procedure", "memory_stats", "memory_consolidate", "memory_forget",
         "memory_update"}
READ_ONLY = {"memory_recall", "memory_context", "memory_stats"}
SERVER_ARGS = ["-m", "memdir", "mcp"]  # the real CLI, as an agent starts it


@pytest.fixture
def server(md: Memdir) -> MCPServer[Any]:
    return build_server(md=md)


def run(server: MCPServer[Any], scenario: Scenario) -> None:
    async def main() -> None:
        async with Client(server, read_timeout_seconds=30) as client:
            await scenario(client)

    anyio.run(main)


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    assert json.loads(text(result)) == result.structured_content
    return result.structured_content


def server_env(home: Path) -> dict[str, str]:
    keep = ("MEMDIR_CONFIG", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME")
    return {**{k: os.environ[k] for k in keep}, "MEMDIR_HOME": str(home)}


def test_tools_are_listed_annotated_and_described(server: MCPServer[Any]) -> None:
    async def scenario(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for name, tool in tools.items():
            assert tool.description, name
            assert tool.annotations is not None, name
            assert bool(tool.annotations.read_only_hint) == (name in READ_ONLY), name
            for prop, schema in tool.input_schema.get("properties", {}).items():
                assert schema.get("description"), (name, prop)
            assert tool.output_schema is not None, name
        forget, learn = tools["memory_forget"].annotations, tools["memory_learn"].annotations
        assert forget is not None and forget.destructive_hint is True
        assert learn is not None and learn.destructive_hint is False
        assert tools["memory_learn"].input_schema["required"] == ["content", "type"]
        assert "preference" in (tools["memory_learn"].description or "")
        assert "hits" in (tools["memory_recall"].output_schema or {})["properties"]

    run(server, scenario)


def test_tool_descriptions_carry_no_stray_indentation(server: MCPServer[Any]) -> None:
    """Docstrings as descriptions keep their source indentation unless dedented; the agent
    reads the description as it is."""
    async def scenario(client: Client) -> None:
        tools = (await client.list_tools()).tools
        multi = [t.name for t in tools if "\n" in (t.description or "")]
        assert multi, "no multi-line description: the check below would prove nothing"
        for tool in tools:
            description = tool.description or ""
            assert description == description.strip(), tool.name
            indented = [line for line in description.splitlines() if line[:1].isspace()]
            assert indented == [], (tool.name, indented)

    run(server, scenario)


def test_learn_recall_context_and_stats(server: MCPServer[Any], md: Memdir) -> None:
    async def scenario(client: Client) -> None:
        learned = ok(await client.call_tool("memory_learn", {
            "content": "Deployments go through ArgoCD, never kubectl apply",
            "type": "decision", "tags": ["deploy"], "relevance": "high"}))
        assert learned["action"] == "stored"
        learned = learned["memory"]
        assert learned["type"] == "decision" and learned["scope"] == "project"
        assert Path(learned["file"]).is_file() and learned["relevance"] == 0.8
        again = ok(await client.call_tool("memory_learn", {
            "content": "deployments go through ArgoCD,  never kubectl apply", "type": "decision"}))
        assert again["action"] == "reinforced" and again["memory"]["id"] == learned["id"]
        ok(await client.call_tool("memory_learn", {
            "content": "I prefer pnpm over npm " + "for every deploy script " * 20,
            "type": "preference", "scope": "user"}))

        found = ok(await client.call_tool("memory_recall", {"query": "deploy"}))
        assert found["count"] == 2 and not found["truncated"]
        hit = next(h for h in found["hits"] if h["id"] == learned["id"])
        assert hit["file"] == learned["file"] and "ArgoCD" in hit["body"] and hit["score"] > 0
        user_only = ok(await client.call_tool("memory_recall",
                                              {"query": "deploy", "scopes": ["user"]}))
        assert [h["scope"] for h in user_only["hits"]] == ["user"]
        decisions = ok(await client.call_tool("memory_recall",
                                              {"query": "deploy", "types": ["architecture"]}))
        assert [h["id"] for h in decisions["hits"]] == [learned["id"]]  # alias of decision
        cheap = ok(await client.call_tool("memory_recall", {"query": "deploy",
                                                            "budget_tokens": 20}))
        assert cheap["truncated"] and cheap["tokens"] <= 20
        assert [h["id"] for h in cheap["hits"]] == [learned["id"]]

        ctx = ok(await client.call_tool("memory_context", {"query": "deploy",
                                                           "budget_tokens": 300}))
        assert "ArgoCD" in ctx["text"] and 0 < ctx["tokens"] <= 300 and ctx["count"] == 2
        stats = ok(await client.call_tool("memory_stats"))
        assert stats == md.stats().to_dict() and stats["total"] == 2

    run(server, scenario)


def test_errors_are_results_with_a_hint(server: MCPServer[Any]) -> None:
    async def scenario(client: Client) -> None:
        bad = await client.call_tool("memory_learn", {"content": "x y z", "type": "nope"})
        assert bad.is_error
        message, hint = text(bad).split("\n")
        assert "nope" in message
        assert hint.startswith("hint: ") and "preference" in hint and "decision" in hint
        secret = await client.call_tool("memory_learn", {
            "content": "the key is sk-ant-api03-" + "a" * 80, "type": "fact"})
        assert secret.is_error and "hint:" in text(secret) and "aaaa" not in text(secret)
        missing = await client.call_tool("memory_update", {"ref": "nosuchid", "reinforce": True})
        assert missing.is_error and "nosuchid" in text(missing) and "hint:" in text(missing)
        invalid = await client.call_tool("memory_recall", {"query": "x", "limit": 0})
        assert invalid.is_error and "limit" in text(invalid)
        # the server goes on serving after every error
        assert ok(await client.call_tool("memory_stats"))["total"] == 0

    run(server, scenario)


def test_an_unexpected_exception_is_an_internal_error_logged_to_stderr(
        caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> object:
        raise RuntimeError("disk on fire")

    with caplog.at_level(logging.ERROR, logger="memdir"):
        result = run_tool(threading.Lock(), boom)
    assert result.is_error and text(result) == "internal error: RuntimeError: disk on fire"
    assert caplog.records[0].exc_info is not None


def test_episode_and_procedure(server: MCPServer[Any]) -> None:
    async def scenario(client: Client) -> None:
        episode = ok(await client.call_tool("memory_episode", {
            "event": "Migrated the orders table", "outcome": "success", "tags": ["db"]}))
        assert episode["type"] == "episode" and episode["meta"]["outcome"] == "success"
        assert "Migrated the orders table" in episode["body"] and episode["tags"] == ["db"]

        saved = ok(await client.call_tool("memory_procedure", {
            "name": "Release", "steps": ["bump the version", "tag and push"]}))
        assert saved["type"] == "procedure" and "2. tag and push" in saved["body"]
        assert (saved["success_count"], saved["failure_count"]) == (0, 0)
        run1 = ok(await client.call_tool("memory_procedure",
                                         {"name": "Release", "result": "success"}))
        run2 = ok(await client.call_tool("memory_procedure",
                                         {"name": "release", "result": "failure"}))
        assert run1["id"] == run2["id"] == saved["id"]
        assert (run2["success_count"], run2["failure_count"]) == (1, 1)
        both = ok(await client.call_tool("memory_procedure", {
            "name": "Release", "steps": ["bump", "tag", "publish"], "result": "success"}))
        assert both["success_count"] == 2 and "3. publish" in both["body"]

        nothing = await client.call_tool("memory_procedure", {"name": "Release"})
        assert nothing.is_error and "hint:" in text(nothing) and "steps" in text(nothing)
        unknown = await client.call_tool("memory_procedure",
                                         {"name": "Nope", "result": "success"})
        assert unknown.is_error and "hint:" in text(unknown)

    run(server, scenario)


def test_update_and_forget(server: MCPServer[Any]) -> None:
    async def scenario(client: Client) -> None:
        m = ok(await client.call_tool("memory_learn", {
            "content": "Staging database is read-only on Fridays", "type": "fact"}))["memory"]
        updated = ok(await client.call_tool("memory_update", {
            "ref": m["id"], "content": "Staging database is read-only on Fridays and Mondays",
            "tags": ["db"], "reinforce": True}))
        assert updated["id"] == m["id"] and updated["file"] == m["file"]
        assert "Mondays" in updated["body"] and updated["tags"] == ["db"]
        assert updated["reinforced"] == 1
        by_file = ok(await client.call_tool("memory_update", {
            "ref": Path(m["file"]).name, "name": "Staging DB"}))
        assert by_file["name"] == "Staging DB" and "Mondays" in by_file["body"]

        archived = ok(await client.call_tool("memory_forget", {"ref": m["id"]}))
        assert archived == {"id": m["id"], "name": "Staging DB", "file": m["file"],
                            "action": "archived"}
        assert Path(m["file"]).is_file()
        assert ok(await client.call_tool("memory_recall", {"query": "staging"}))["count"] == 0
        kept = ok(await client.call_tool("memory_recall", {"query": "staging",
                                                           "include_archived": True}))
        assert [(h["id"], h["status"]) for h in kept["hits"]] == [(m["id"], "archived")]

        deleted = ok(await client.call_tool("memory_forget", {"ref": m["id"],
                                                              "permanent": True}))
        assert deleted["action"] == "deleted" and not Path(m["file"]).exists()
        gone = await client.call_tool("memory_forget", {"ref": m["id"]})
        assert gone.is_error and "hint:" in text(gone)

    run(server, scenario)


def test_consolidate_returns_the_plan(server: MCPServer[Any], md: Memdir) -> None:
    a = md.store("Use ruff for linting the Python code in this repository", type="preference")
    b = md.store("Use ruff for linting the Python code in this repository, always",
                 type="preference")

    async def scenario(client: Client) -> None:
        plan = ok(await client.call_tool("memory_consolidate"))
        assert plan["applied"] is False
        merges = [op for op in plan["operations"] if op["op"] == "merge"]
        assert len(merges) == 1 and set(merges[0]["memories"]) == {a.id, b.id}
        assert merges[0]["reason"]
        assert md.stats().by_status == {"active": 2}  # a dry run changes nothing
        applied = ok(await client.call_tool("memory_consolidate", {"dry_run": False}))
        assert applied["applied"] is True
        assert md.stats().by_status == {"active": 1, "archived": 1}

    run(server, scenario)


def test_index_resources(server: MCPServer[Any], md: Memdir) -> None:
    memory = md.store("Integration tests hit a real database", type="feedback")

    async def scenario(client: Client) -> None:
        uris = [str(r.uri) for r in (await client.list_resources()).resources]
        assert uris == ["memdir://index"]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["memdir://index/{scope}"]
        project = (await client.read_resource("memdir://index")).contents[0]
        assert memory.file in getattr(project, "text", "")
        assert getattr(project, "text", "") == md.memory_index("project")
        user = (await client.read_resource("memdir://index/user")).contents[0]
        assert memory.file not in getattr(user, "text", "")
        with pytest.raises(MCPError, match="hint: "):
            await client.read_resource("memdir://index/galaxy")

    run(server, scenario)


def test_a_real_client_over_stdio(home: Path, repo: Path, tmp_path: Path) -> None:
    errors = tmp_path / "stderr.txt"
    params = StdioServerParameters(command=sys.executable, args=SERVER_ARGS,
                                   env=server_env(home), cwd=repo)

    async def main() -> None:
        with errors.open("w") as errlog:
            transport = stdio_client(params, errlog=errlog)
            async with Client(transport, mode="legacy", read_timeout_seconds=30) as client:
                assert client.server_info is not None and client.server_info.name == "memdir"
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == TOOLS
                learned = ok(await client.call_tool("memory_learn", {
                    "content": "Merge freeze starts on 2026-12-01", "type": "project"}))
                found = ok(await client.call_tool("memory_recall", {"query": "merge freeze"}))
                assert [h["id"] for h in found["hits"]] == [learned["memory"]["id"]]
                bad = await client.call_tool("memory_learn", {"content": "x", "type": "nope"})
                assert bad.is_error and "hint:" in text(bad)

    anyio.run(main)
    with Memdir(home, repo) as md:  # the server used the project of its working directory
        assert [m.body for m in md.list()] == ["Merge freeze starts on 2026-12-01"]
    assert "Traceback" not in errors.read_text()


def test_stdout_carries_only_the_protocol(home: Path, repo: Path) -> None:
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory_learn", "arguments": {"content": "Use pnpm", "type": "preference"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "memory_learn", "arguments": {"content": "x", "type": "nope"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "memory_consolidate", "arguments": {"dry_run": True}}},
        {"jsonrpc": "2.0", "id": 5, "method": "resources/read",
         "params": {"uri": "memdir://index"}},
    ]
    proc = subprocess.Popen([sys.executable, *SERVER_ARGS], cwd=repo, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **server_env(home)})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
    proc.stdin.flush()
    answers: dict[int, dict[str, Any]] = {}
    while len(answers) < 5:
        line = proc.stdout.readline()
        assert line, "the server closed stdout early"
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        if "id" in message:
            answers[message["id"]] = message
    out, err = proc.communicate(timeout=30)
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in out.splitlines())
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert answers[1]["result"]["serverInfo"]["name"] == "memdir"
    assert answers[2]["result"]["structuredContent"]["action"] == "stored"
    assert answers[3]["result"]["isError"] is True
    assert "preference_use-pnpm.md" in answers[5]["result"]["contents"][0]["text"]


def test_learn_returns_what_cli_store_json_prints(server: MCPServer[Any], cli: CLI) -> None:
    """One record, one shape: ``memdir store --json`` and ``memory_learn`` of the same content
    (the second reinforces the first) return the same keys, the memory as
    ``Memory.to_dict()`` gives it."""
    content = "Release notes are written in the pull request, not afterwards"
    stored = cli_json(cli("store", content, "--type", "decision", "--json"))
    learned: dict[str, Any] = {}

    async def scenario(client: Client) -> None:
        learned.update(ok(await client.call_tool("memory_learn", {
            "content": content, "type": "decision"})))

    run(server, scenario)
    assert isinstance(stored, dict)
    assert (stored["action"], learned["action"]) == ("stored", "reinforced")
    assert set(learned) == set(stored) == {"action", "memory", "conflicts"}
    assert set(learned["memory"]) == set(stored["memory"])
    assert learned["memory"]["id"] == stored["memory"]["id"]
    assert learned["memory"]["content"] == stored["memory"]["content"] == content
    assert learned["conflicts"] == stored["conflicts"] == []
