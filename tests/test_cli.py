"""The `memdir` command end to end, as a user runs it: real subprocesses, real files, real
SQLite. Every command, its options, its text and JSON output, and its errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CLI, cli_json, git
from memdir import __version__
from memdir.core.paths import project_key

COMMANDS = ("store", "search", "about", "decisions", "recent", "list", "get", "update",
            "reclassify", "archive", "restore", "delete", "stats", "reindex", "doctor", "types",
            "export", "import", "adopt")

BROKEN_YAML = "---\nname: [unclosed\ntype: fact\n---\nThis file has broken frontmatter.\n"


# -- helpers ---------------------------------------------------------------------------------


def project_dir(home: Path, repo: Path) -> Path:
    return home / "projects" / project_key(repo.resolve())


def memory_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.md") if p.name != "MEMORY.md")


def frontmatter(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), text
    front, body = text[4:].split("\n---\n", 1)
    data = yaml.safe_load(front)
    assert isinstance(data, dict)
    return data, body


def store(cli: CLI, content: str, type_: str, *args: str,
          cwd: Path | None = None) -> dict[str, Any]:
    out = cli_json(cli("store", content, "--type", type_, *args, "--json", cwd=cwd))
    assert isinstance(out, dict) and out["action"] == "stored", out
    memory = out["memory"]
    assert isinstance(memory, dict)
    return memory


def ids(output: object) -> list[str]:
    """Memory ids of a --json result: a list of memories or of hits."""
    assert isinstance(output, list), output
    return [item["memory"]["id"] if "memory" in item else item["id"] for item in output]


def search_ids(cli: CLI, query: str, *args: str) -> list[str]:
    return ids(cli_json(cli("search", query, *args, "--json")))


def list_ids(cli: CLI, *args: str) -> list[str]:
    return ids(cli_json(cli("list", *args, "--json")))


def assert_error(result: subprocess.CompletedProcess[str], exit_code: int, *needles: str) -> None:
    """A user error: the exit code, `error:` and `hint:` lines on stderr, nothing on stdout."""
    assert result.returncode == exit_code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert any(line.startswith("error:") for line in lines), result.stderr
    hints = [line for line in lines if line.startswith("hint:")]
    assert hints and hints[0][len("hint:"):].strip(), result.stderr
    assert result.stdout == ""
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def json_error(result: subprocess.CompletedProcess[str], exit_code: int, code: str) -> None:
    assert result.returncode == exit_code, (result.returncode, result.stderr)
    assert result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["hint"], str) and error["hint"]


# -- version, help ---------------------------------------------------------------------------


def test_version_help_and_no_command(cli: CLI) -> None:
    version = cli("--version")
    assert version.returncode == 0
    assert version.stdout.strip() == f"memdir {__version__}"

    helped = cli("--help")
    assert helped.returncode == 0
    for command in COMMANDS:
        assert command in helped.stdout, command

    bare = cli()
    assert bare.returncode == 0
    assert bare.stdout == helped.stdout

    store_help = cli("store", "--help")
    assert store_help.returncode == 0
    for option in ("--type", "--scope", "--relevance", "--meta", "--paths", "--tags"):
        assert option in store_help.stdout


# -- store -----------------------------------------------------------------------------------


def test_store_from_stdin_with_every_field(cli: CLI, home: Path, repo: Path) -> None:
    content = "Deployments use ArgoCD\n\nWe chose it over Flux for its UI."
    out = cli_json(cli("store", "-", "--type", "decision", "--scope", "project",
                       "--name", "Deploy tool", "--description", "Which CD tool deploys us",
                       "--tags", "infra, ci", "--paths", "deploy/**,k8s/*.yaml",
                       "--relevance", "0.7", "--meta", "ticket=OPS-42", "--meta", "owner=ana",
                       "--json", input=content))
    assert isinstance(out, dict)
    assert out["action"] == "stored"
    memory = out["memory"]
    path = project_dir(home, repo) / "decision_deploy-tool.md"
    assert memory["file"] == str(path)
    assert memory_files(project_dir(home, repo)) == [path]

    data, body = frontmatter(path)
    assert body.strip() == content
    assert data["id"] == memory["id"] and len(memory["id"]) == 8
    assert data["name"] == "Deploy tool"
    assert data["description"] == "Which CD tool deploys us"
    assert data["type"] == "decision"
    assert data["scope"] == "project"
    assert data["relevance"] == 0.7
    assert data["tags"] == ["infra", "ci"]
    assert data["paths"] == ["deploy/**", "k8s/*.yaml"]
    assert data["ticket"] == "OPS-42" and data["owner"] == "ana"
    assert data["reinforced"] == 0 and data["status"] == "active"
    assert memory["meta"] == {"ticket": "OPS-42", "owner": "ana"}
    assert memory["content"] == content

    # MEMORY.md is generated and lists the new memory.
    assert "decision_deploy-tool.md" in (project_dir(home, repo) / "MEMORY.md").read_text()


def test_store_scopes_relevance_words_and_text_output(cli: CLI, home: Path, repo: Path) -> None:
    user = store(cli, "Prefers tabs over spaces", "preference", "--scope", "user",
                 "--relevance", "high")
    assert Path(user["file"]).parent == home / "user"
    assert user["relevance"] == 0.8
    assert frontmatter(Path(user["file"]))[0]["scope"] == "user"

    team = store(cli, "All services log JSON to stdout", "policy", "--scope", "team",
                 "--relevance", "low")
    assert Path(team["file"]).parent == repo.resolve() / ".memdir" / "team"
    assert team["relevance"] == 0.3

    # Default relevance comes from the type (policy: 1.0), else 0.9 for a manual memory.
    assert store(cli, "Never force-push main", "policy")["relevance"] == 1.0
    assert store(cli, "The CI runners have 8 GB of RAM", "fact")["relevance"] == 0.9
    # Aliases and plurals resolve to the canonical type.
    assert store(cli, "Use conventional commits", "conventions")["type"] == "policy"

    text = cli("store", "Redis runs in cluster mode", "--type", "fact")
    assert text.returncode == 0, text.stderr
    stored = memory_files(project_dir(home, repo))
    path = project_dir(home, repo) / "fact_redis-runs-in-cluster-mode.md"
    assert path in stored
    assert text.stdout.startswith("stored ") and str(path) in text.stdout


def test_store_same_content_again_reinforces(cli: CLI, home: Path, repo: Path) -> None:
    first = store(cli, "Builds run on Buildkite", "fact", "--tags", "ci")
    before = memory_files(project_dir(home, repo))

    again = cli_json(cli("store", "  builds RUN\non   BUILDKITE \n", "--type", "fact",
                         "--tags", "build", "--json"))
    assert isinstance(again, dict)
    assert again["action"] == "reinforced"
    assert again["memory"]["id"] == first["id"]
    assert again["memory"]["reinforced"] == 1
    assert memory_files(project_dir(home, repo)) == before
    data, body = frontmatter(Path(first["file"]))
    assert data["reinforced"] == 1
    assert body.strip() == "Builds run on Buildkite"
    assert data["tags"] == ["ci", "build"]

    text = cli("store", "builds run on buildkite", "--type", "fact")
    assert text.returncode == 0
    assert "reinforced" in text.stdout and first["id"] in text.stdout
    assert frontmatter(Path(first["file"]))[0]["reinforced"] == 2
    assert memory_files(project_dir(home, repo)) == before


# -- search ----------------------------------------------------------------------------------


def test_search_table_json_and_stemming(cli: CLI) -> None:
    argo = store(cli, "Deployments use ArgoCD", "decision")
    store(cli, "The office coffee machine is broken", "fact")

    table = cli("search", "argocd")
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header == ["SCORE", "ID", "TYPE", "SCOPE", "MEMORY"]
    assert argo["id"] in table.stdout and "Deployments use ArgoCD" in table.stdout
    assert "coffee" not in table.stdout

    hits = cli_json(cli("search", "argocd", "--json"))
    assert isinstance(hits, list) and len(hits) == 1
    assert hits[0]["memory"]["id"] == argo["id"]
    assert hits[0]["score"] > 0 and hits[0]["match"] > 0 and hits[0]["strength"] > 0

    # Stemming: other forms of the words find the memory.
    assert search_ids(cli, "deployment") == [argo["id"]]
    assert search_ids(cli, "deploy") == [argo["id"]]

    none = cli("search", "kubernetes")
    assert none.returncode == 0
    assert "no memories match" in none.stdout
    assert cli_json(cli("search", "kubernetes", "--json")) == []


def test_search_filters_archived_and_limit(cli: CLI) -> None:
    decision = store(cli, "Kafka topics are partitioned by tenant", "decision", "--tags", "infra")
    fact = store(cli, "Kafka brokers run on three nodes", "fact", "--scope", "user",
                 "--tags", "ops")
    pitfall = store(cli, "Kafka consumer lag spikes after a rebalance", "pitfall",
                    "--tags", "ops,infra")
    everyone = {decision["id"], fact["id"], pitfall["id"]}

    assert set(search_ids(cli, "kafka")) == everyone
    assert search_ids(cli, "kafka", "--type", "decision") == [decision["id"]]
    assert search_ids(cli, "kafka", "--type", "decisions") == [decision["id"]]
    assert set(search_ids(cli, "kafka", "--type", "fact", "--type", "pitfall")) == \
        {fact["id"], pitfall["id"]}
    assert search_ids(cli, "kafka", "--scope", "user") == [fact["id"]]
    assert set(search_ids(cli, "kafka", "--scope", "project")) == {decision["id"], pitfall["id"]}
    assert set(search_ids(cli, "kafka", "--tags", "infra")) == {decision["id"], pitfall["id"]}
    assert set(search_ids(cli, "kafka", "--tags", "ops")) == {fact["id"], pitfall["id"]}
    assert len(search_ids(cli, "kafka", "--limit", "2")) == 2
    assert len(search_ids(cli, "kafka", "--limit", "1")) == 1

    assert cli("archive", pitfall["id"]).returncode == 0
    assert set(search_ids(cli, "kafka")) == {decision["id"], fact["id"]}
    assert search_ids(cli, "rebalance") == []
    assert search_ids(cli, "rebalance", "--archived") == [pitfall["id"]]
    assert set(search_ids(cli, "kafka", "--archived")) == everyone

    assert_error(cli("search", "kafka", "--limit", "0"), 2)


FTS_SYNTAX = ['"unbalanced', "AND OR NOT", "foo*", "NEAR(", "col:x", "(", ")", '"', "*", "^",
              "-", "+", "AND", "NOT x", "name:argocd", "{name body}: argocd",
              "argocd NEAR/2 x", "'single", "", "   ", "\\", "%_%", "🙂 ünïcödé", "a" * 5000,
              " ".join(f"w{n}" for n in range(200))]


def test_search_never_fails_on_fts_syntax(cli: CLI) -> None:
    store(cli, "Deployments use ArgoCD and foo bars", "decision")
    for query in FTS_SYNTAX:
        result = cli("search", query, "--json", "--archived")
        assert result.returncode == 0, (query, result.stderr)
        assert result.stderr == "", query
        assert isinstance(json.loads(result.stdout), list)
    for query in FTS_SYNTAX[:5]:
        result = cli("search", query)
        assert result.returncode == 0 and result.stderr == "", query


def test_search_query_with_fts_syntax_still_finds_words(cli: CLI) -> None:
    argo = store(cli, "Deployments use ArgoCD", "decision")
    for query in ('"argocd', "argocd*", "NEAR(argocd", "name:argocd", "AND argocd OR"):
        assert search_ids(cli, query) == [argo["id"]], query


# -- about, decisions, recent, list ----------------------------------------------------------


def test_about_groups_by_type_with_section_titles(cli: CLI) -> None:
    decision = store(cli, "Postgres is the primary datastore", "decision")
    fact = store(cli, "Postgres runs version 16 in production", "fact")
    pitfall = store(cli, "Postgres vacuum stalls when long transactions stay open", "pitfall")
    store(cli, "The frontend is written in Svelte", "fact")

    out = cli("about", "postgres")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line.startswith("### "):
            current = line
            sections[current] = []
        elif line.strip():
            assert current is not None, out.stdout
            sections[current].append(line)
    assert set(sections) == {"### [D] Decisions", "### [F] Key Facts", "### [X] Pitfalls"}
    assert sections["### [D] Decisions"] == [f"- {decision['description']}  ({decision['id']})"]
    assert sections["### [F] Key Facts"] == [f"- {fact['description']}  ({fact['id']})"]
    assert sections["### [X] Pitfalls"] == [f"- {pitfall['description']}  ({pitfall['id']})"]
    assert "Svelte" not in out.stdout

    hits = cli_json(cli("about", "postgres", "--json"))
    assert set(ids(hits)) == {decision["id"], fact["id"], pitfall["id"]}
    assert set(ids(cli_json(cli("about", "postgres", "--type", "fact", "--json")))) == \
        {fact["id"]}

    nothing = cli("about", "haskell")
    assert nothing.returncode == 0 and "nothing known about" in nothing.stdout


def test_decisions_lists_only_decisions(cli: CLI) -> None:
    first = store(cli, "We use trunk-based development", "decision")
    second = store(cli, "Feature flags live in LaunchDarkly", "adr")
    store(cli, "The build takes eight minutes", "fact")
    archived = store(cli, "We used to deploy on Fridays", "decision")
    assert cli("archive", archived["id"]).returncode == 0

    assert set(ids(cli_json(cli("decisions", "--json")))) == {first["id"], second["id"]}
    text = cli("decisions")
    assert text.returncode == 0
    assert first["id"] in text.stdout and second["id"] in text.stdout
    assert "eight minutes" not in text.stdout and archived["id"] not in text.stdout
    assert len(ids(cli_json(cli("decisions", "--limit", "1", "--json")))) == 1


def _import_dated(cli: CLI) -> dict[str, str]:
    """Three memories with distinct creation times (oldest first), via `import -`."""
    items = [
        {"id": "oldmemry", "type": "fact", "content": "Alpha: the oldest memory",
         "created": "2023-01-10T08:00:00Z", "tags": ["t1"], "relevance": 0.95},
        {"id": "midmemry", "type": "decision", "content": "Bravo: the middle memory",
         "created": "2024-05-20T08:00:00Z", "tags": ["t2"], "relevance": 0.4},
        {"id": "newmemry", "type": "fact", "content": "Charlie: the newest memory",
         "created": "2025-09-01T08:00:00Z", "updated": "2025-09-02T08:00:00Z",
         "tags": ["t1", "t2"], "relevance": 0.6},
    ]
    result = cli("import", "-", input="".join(json.dumps(i) + "\n" for i in items))
    assert result.returncode == 0, result.stderr
    assert "imported 3" in result.stdout
    return {"old": "oldmemry", "mid": "midmemry", "new": "newmemry"}


def test_recent_is_newest_first(cli: CLI) -> None:
    m = _import_dated(cli)
    assert ids(cli_json(cli("recent", "--json"))) == [m["new"], m["mid"], m["old"]]
    assert ids(cli_json(cli("recent", "2", "--json"))) == [m["new"], m["mid"]]
    assert ids(cli_json(cli("recent", "5", "--type", "fact", "--json"))) == [m["new"], m["old"]]
    text = cli("recent", "1")
    assert text.returncode == 0
    assert m["new"] in text.stdout and m["mid"] not in text.stdout
    assert text.stdout.splitlines()[0].split() == ["ID", "TYPE", "SCOPE", "REL", "UPDATED",
                                                   "MEMORY"]


def test_list_orders_and_filters(cli: CLI) -> None:
    m = _import_dated(cli)
    assert list_ids(cli) == [m["old"], m["new"], m["mid"]]  # relevance 0.95, 0.6, 0.4
    assert list_ids(cli, "--order", "recent") == [m["new"], m["mid"], m["old"]]
    assert list_ids(cli, "--order", "updated") == [m["new"], m["mid"], m["old"]]
    assert list_ids(cli, "--order", "name") == [m["old"], m["mid"], m["new"]]
    assert list_ids(cli, "--type", "fact") == [m["old"], m["new"]]
    assert list_ids(cli, "--tags", "t2") == [m["new"], m["mid"]]
    assert list_ids(cli, "--limit", "1") == [m["old"]]

    assert cli("archive", m["mid"]).returncode == 0
    assert list_ids(cli) == [m["old"], m["new"]]
    assert list_ids(cli, "--status", "archived") == [m["mid"]]
    assert set(list_ids(cli, "--status", "all")) == set(m.values())

    empty = cli("list", "--type", "pitfall")
    assert empty.returncode == 0 and "no memories" in empty.stdout


def test_list_paths_glob_filter(cli: CLI) -> None:
    tests_memory = store(cli, "Tests need the fake clock fixture", "procedure",
                         "--paths", "tests/**")
    src_memory = store(cli, "App modules must not import tests", "policy",
                       "--paths", "src/*.py")
    store(cli, "No paths on this one", "fact")

    assert list_ids(cli, "--paths", "tests/unit/test_x.py") == [tests_memory["id"]]
    assert list_ids(cli, "--paths", "src/app.py") == [src_memory["id"]]
    assert list_ids(cli, "--paths", "src/pkg/app.py") == []
    assert set(list_ids(cli, "--paths", "tests/a.py,src/b.py")) == \
        {tests_memory["id"], src_memory["id"]}
    assert search_ids(cli, "tests", "--paths", "tests/unit/test_x.py") == [tests_memory["id"]]


# -- get, update, reclassify, archive, restore, delete ---------------------------------------


def test_get_by_id_and_by_file_name(cli: CLI) -> None:
    memory = store(cli, "Staging lives in eu-west-1\n\nProduction is in eu-central-1.", "fact",
                   "--name", "AWS regions", "--tags", "aws", "--meta", "ticket=OPS-7")
    text = cli("get", memory["id"])
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0] == "AWS regions"
    for part in (f"id: {memory['id']}", "type: fact", "scope: project", "tags: aws",
                 "ticket: OPS-7", f"file: {memory['file']}", "Production is in eu-central-1."):
        assert part in text.stdout, part

    by_file = cli_json(cli("get", Path(memory["file"]).name, "--json"))
    assert isinstance(by_file, dict)
    assert by_file["id"] == memory["id"]
    assert by_file["content"] == memory["content"]
    assert by_file["access_count"] == 2  # `get` counts as an access
    again = cli_json(cli("get", memory["id"], "--json"))
    assert isinstance(again, dict) and again["access_count"] == 3

    assert_error(cli("get", "nosuchid"), 3, "nosuchid")
    json_error(cli("get", "nosuchid", "--json"), 3, "not_found")
    escape = cli("get", "../../etc/passwd.md")
    assert escape.returncode != 0
    assert_error(escape, escape.returncode)
    json_error(cli("get", "../../etc/passwd.md", "--json"), escape.returncode, "path_traversal")


def test_update_content_fields_and_reinforce(cli: CLI, home: Path, repo: Path) -> None:
    memory = store(cli, "The cache TTL is 60 seconds", "fact", "--tags", "cache")
    path = Path(memory["file"])

    updated = cli_json(cli("update", memory["id"], "--content", "The cache TTL is 5 minutes",
                           "--tags", "cache,perf", "--relevance", "critical", "--json"))
    assert isinstance(updated, dict)
    assert updated["id"] == memory["id"] and updated["file"] == memory["file"]
    assert memory_files(project_dir(home, repo)) == [path]
    data, body = frontmatter(path)
    assert body.strip() == "The cache TTL is 5 minutes"
    assert data["tags"] == ["cache", "perf"] and data["relevance"] == 1.0
    assert data["reinforced"] == 0
    assert search_ids(cli, "minutes") == [memory["id"]]
    assert search_ids(cli, "seconds") == []

    for expected in (1, 2):
        result = cli_json(cli("update", memory["id"], "--reinforce", "--json"))
        assert isinstance(result, dict) and result["reinforced"] == expected
        assert frontmatter(path)[0]["reinforced"] == expected
    assert frontmatter(path)[1].strip() == "The cache TTL is 5 minutes"

    text = cli("update", path.name, "--content", "-", input="The cache TTL is one hour\n")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"updated {memory['id']}")
    assert frontmatter(path)[1].strip() == "The cache TTL is one hour"

    before = path.read_bytes()
    refused = cli("update", memory["id"], "--content", "password=Sup3rSecret!")
    assert_error(refused, 2, "password")
    assert "Sup3rSecret!" not in refused.stderr
    assert path.read_bytes() == before
    assert_error(cli("update", "nosuchid", "--reinforce"), 3)


def test_reclassify_renames_the_file_and_keeps_the_id(cli: CLI, home: Path, repo: Path) -> None:
    memory = store(cli, "Use uv for dependency management", "fact")
    old = Path(memory["file"])
    assert old.name == "fact_use-uv-for-dependency-management.md"

    moved = cli_json(cli("reclassify", memory["id"], "decision", "--json"))
    assert isinstance(moved, dict)
    new = Path(moved["file"])
    assert new.name == "decision_use-uv-for-dependency-management.md"
    assert moved["id"] == memory["id"] and moved["type"] == "decision"
    assert not old.exists()
    assert memory_files(project_dir(home, repo)) == [new]
    data, body = frontmatter(new)
    assert data["id"] == memory["id"] and data["type"] == "decision"
    assert body.strip() == "Use uv for dependency management"
    got = cli_json(cli("get", memory["id"], "--json"))
    assert isinstance(got, dict) and got["file"] == str(new)

    text = cli("reclassify", new.name, "procedures")
    assert text.returncode == 0, text.stderr
    assert "is now a procedure" in text.stdout
    assert memory_files(project_dir(home, repo))[0].name.startswith("procedure_")

    assert_error(cli("reclassify", memory["id"], "nonsense"), 2, "decision")


def test_archive_restore_delete(cli: CLI, home: Path, repo: Path) -> None:
    memory = store(cli, "Grafana dashboards live in the ops folder", "reference")
    keep = store(cli, "Alerts go to the on-call channel", "reference")
    path = Path(memory["file"])
    index_md = project_dir(home, repo) / "MEMORY.md"
    assert path.name in index_md.read_text()

    archived = cli("archive", memory["id"])
    assert archived.returncode == 0 and archived.stdout.startswith(f"archived {memory['id']}")
    assert frontmatter(path)[0]["status"] == "archived"
    assert path.name not in index_md.read_text()  # archived memories are never injected
    assert search_ids(cli, "grafana") == []
    assert list_ids(cli, "--status", "archived") == [memory["id"]]

    restored = cli_json(cli("restore", path.name, "--json"))
    assert isinstance(restored, dict) and restored["status"] == "active"
    assert frontmatter(path)[0]["status"] == "active"
    assert search_ids(cli, "grafana") == [memory["id"]]
    assert path.name in index_md.read_text()

    deleted = cli("delete", memory["id"])
    assert deleted.returncode == 0 and deleted.stdout.startswith(f"deleted {memory['id']}")
    assert not path.exists()
    assert path.name not in index_md.read_text()
    assert search_ids(cli, "grafana", "--archived") == []
    assert_error(cli("get", memory["id"]), 3)
    assert_error(cli("delete", memory["id"]), 3)
    assert list_ids(cli, "--status", "all") == [keep["id"]]


# -- stats, types, reindex, doctor -----------------------------------------------------------


def test_stats_counts(cli: CLI, home: Path, repo: Path) -> None:
    one = store(cli, "Decision number one about queues", "decision")
    store(cli, "Decision number two about caches", "decision")
    store(cli, "The user is a backend engineer", "user", "--scope", "user")
    assert cli("archive", one["id"]).returncode == 0
    assert cli("search", "caches").returncode == 0  # one access

    stats = cli_json(cli("stats", "--json"))
    assert isinstance(stats, dict)
    assert stats["total"] == 3
    assert stats["by_type"] == {"decision": 2, "user": 1}
    assert stats["by_scope"] == {"project": 2, "user": 1}
    assert stats["by_status"] == {"active": 2, "archived": 1}
    assert stats["never_accessed"] == 2
    assert stats["broken_files"] == 0
    assert stats["directories"]["project"] == str(project_dir(home, repo))
    assert stats["directories"]["user"] == str(home / "user")
    assert stats["index_path"] == str(home / "index.sqlite")
    assert stats["taxonomy"]["project"] == "memdir"

    text = cli("stats")
    assert text.returncode == 0
    assert text.stdout.startswith("3 memories (2 never accessed, 0 broken files)")
    assert "decision 2" in text.stdout and "archived 1" in text.stdout


def test_types(cli: CLI) -> None:
    text = cli("types")
    assert text.returncode == 0
    for scope in ("user", "project", "team"):
        assert f"{scope} (memdir):" in text.stdout
    for name in ("user", "feedback", "preference", "policy", "decision", "procedure",
                 "pitfall", "fact", "reference", "project"):
        assert f" {name} " in text.stdout, name

    data = cli_json(cli("types", "--json"))
    assert isinstance(data, dict) and set(data) == {"user", "project", "team"}
    names = [t["name"] for t in data["project"]["types"]]
    assert "decision" in names and "fact" in names
    decision = next(t for t in data["project"]["types"] if t["name"] == "decision")
    assert "adr" in decision["aliases"] and decision["icon"] == "[D]"


def test_reindex_progress_and_rebuild_from_files(cli: CLI, home: Path) -> None:
    stored = [store(cli, f"Service number {word} speaks gRPC", "fact")
              for word in ("one", "two", "three")]

    quiet = cli("reindex")
    assert quiet.returncode == 0
    assert quiet.stderr == ""  # stderr is not a terminal: no progress bar
    assert quiet.stdout.startswith("reindexed 3 files")

    shown = cli("reindex", "--progress")
    assert shown.returncode == 0
    assert "reindexing [" in shown.stderr and "3/3" in shown.stderr
    assert "#" * 30 in shown.stderr

    (home / "index.sqlite").unlink()
    rebuilt = cli_json(cli("reindex", "--json"))
    assert isinstance(rebuilt, dict) and rebuilt["files"] == 3 and rebuilt["broken"] == 0
    assert (home / "index.sqlite").exists()
    assert set(search_ids(cli, "grpc")) == {m["id"] for m in stored}
    assert search_ids(cli, "two") == [stored[1]["id"]]


def test_doctor_clean_then_broken_yaml(cli: CLI, home: Path, repo: Path) -> None:
    store(cli, "Doctor test memory", "fact")
    clean = cli("doctor")
    assert clean.returncode == 0, clean.stdout
    assert "no problems" in clean.stdout
    assert cli_json(cli("doctor", "--json")) == []

    broken = project_dir(home, repo) / "fact_broken.md"
    broken.write_bytes(BROKEN_YAML.encode())
    sick = cli("doctor")
    assert sick.returncode == 1
    assert str(broken) in sick.stdout
    assert "YAML" in sick.stdout
    assert "Fix the YAML frontmatter" in sick.stdout  # the hint

    as_json = cli("doctor", "--json")
    assert as_json.returncode == 1
    problems = json.loads(as_json.stdout)
    assert [(p["kind"], p["where"]) for p in problems] == [("broken-file", str(broken))]
    assert problems[0]["hint"]
    assert broken.read_bytes() == BROKEN_YAML.encode()


def test_broken_file_does_not_crash_any_command(cli: CLI, home: Path, repo: Path,
                                                tmp_path: Path) -> None:
    good = store(cli, "Terraform state lives in S3", "fact")
    broken = project_dir(home, repo) / "fact_broken.md"
    broken.write_bytes(BROKEN_YAML.encode())

    for args in (["search", "terraform"], ["search", "broken"], ["list"], ["recent"],
                 ["stats"], ["get", good["id"]], ["about", "terraform"], ["decisions"],
                 ["reindex"], ["export", str(tmp_path / "out")],
                 ["export", str(tmp_path / "out.jsonl")], ["types"],
                 ["store", "Another memory beside the faulty one", "--type", "fact"]):
        result = cli(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert "internal error" not in result.stderr

    assert search_ids(cli, "terraform") == [good["id"]]
    assert search_ids(cli, "broken") == []
    stats = cli_json(cli("stats", "--json"))
    assert isinstance(stats, dict) and stats["broken_files"] == 1 and stats["total"] == 2
    assert "1 broken" in cli("reindex").stdout
    assert cli("doctor").returncode == 1
    assert broken.read_bytes() == BROKEN_YAML.encode()
    assert (tmp_path / "out.jsonl").read_text().count("\n") == 1  # exported before the store


# -- adopt -----------------------------------------------------------------------------------

CLAUDE_MEMORY = """---
name: Testing policy
description: Integration tests must hit a real database, not mocks
type: feedback
---
Integration tests must hit a real database, not mocks.

**Why:** mocked tests passed but the prod migration failed.
**How to apply:** use the docker-compose Postgres in tests/.
"""

CLAUDE_INDEX = "# Memory\n\n- [Testing policy](feedback_testing.md) - real database in tests\n"


def test_adopt_claude_code_directory(cli: CLI, home: Path, repo: Path, tmp_path: Path) -> None:
    fake_home = Path(os.environ["HOME"])  # the CLI's HOME: conftest's isolated fake home
    assert fake_home == tmp_path / "userhome"
    claude_dir = fake_home / ".claude" / "projects" / project_key(repo.resolve()) / "memory"
    claude_dir.mkdir(parents=True)
    (claude_dir / "feedback_testing.md").write_text(CLAUDE_MEMORY)
    (claude_dir / "MEMORY.md").write_text(CLAUDE_INDEX)

    adopted = cli("adopt")
    assert adopted.returncode == 0, adopted.stderr
    assert str(claude_dir) in adopted.stdout and "claude-code" in adopted.stdout

    hits = cli_json(cli("search", "database", "--json"))
    assert isinstance(hits, list) and len(hits) == 1
    assert hits[0]["memory"]["id"] == "feedback_testing"
    assert hits[0]["memory"]["type"] == "feedback"
    assert hits[0]["memory"]["file"] == str(claude_dir / "feedback_testing.md")

    user = store(cli, "The user is a data scientist new to Rust", "user")
    assert Path(user["file"]).parent == claude_dir
    assert not project_dir(home, repo).exists()
    assert (claude_dir / "feedback_testing.md").read_text() == CLAUDE_MEMORY
    assert (claude_dir / "MEMORY.md.orig").read_text() == CLAUDE_INDEX
    regenerated = (claude_dir / "MEMORY.md").read_text()
    assert Path(user["file"]).name in regenerated and "feedback_testing.md" in regenerated

    # The project now uses Claude Code's four types.
    assert_error(cli("store", "We picked Kafka", "--type", "decision"), 2, "reference")
    stats = cli_json(cli("stats", "--json"))
    assert isinstance(stats, dict)
    assert stats["directories"]["project"] == str(claude_dir)
    assert stats["taxonomy"]["project"] == "claude-code"
    assert (claude_dir / "feedback_testing.md").read_text() == CLAUDE_MEMORY


def test_adopt_without_a_claude_directory_fails_with_hint(cli: CLI) -> None:
    assert_error(cli("adopt"), 2, "Claude Code")


# -- errors ----------------------------------------------------------------------------------


def test_unknown_type_lists_valid_types(cli: CLI, home: Path, repo: Path) -> None:
    result = cli("store", "Something to remember", "--type", "bogus")
    assert_error(result, 2, "bogus")
    for name in ("user", "feedback", "policy", "decision", "procedure", "pitfall", "fact"):
        assert name in result.stderr, name
    json_error(cli("store", "Something", "--type", "bogus", "--json"), 2, "unknown_type")
    assert_error(cli("search", "x", "--type", "bogus"), 2, "decision")
    assert_error(cli("list", "--type", "bogus"), 2, "decision")
    assert not project_dir(home, repo).exists() or memory_files(project_dir(home, repo)) == []


SECRETS = [
    ("token ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3", "GitHub token", "a1B2c3D4e5a1B2c3D4e5"),
    ("aws key AKIAIOSFODNN7EXAMPL3 in CI", "AWS access key", "AKIAIOSFODNN7EXAMPL3"),
    ("connect with postgres://user:hunter22@db/x", "URL with credentials", "hunter22"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7Zq9Yh3kP0wQmVbL2\n"
     "-----END RSA PRIVATE KEY-----", "private key", "MIIEowIBAAKCAQEAx7Zq9Yh3kP0wQmVbL2"),
    ("the db password=Sup3rSecret! for staging", "password", "Sup3rSecret!"),
]


@pytest.mark.parametrize(("content", "kind", "secret"), SECRETS)
def test_secret_is_refused_and_never_echoed(cli: CLI, home: Path, repo: Path, content: str,
                                            kind: str, secret: str) -> None:
    result = cli("store", content, "--type", "fact")
    assert_error(result, 2, kind)
    assert secret not in result.stderr
    from_stdin = cli("store", "-", "--type", "fact", "--json", input=content)
    json_error(from_stdin, 2, "secret_detected")
    assert secret not in from_stdin.stderr
    as_meta = cli("store", "Harmless text", "--type", "fact", "--meta", f"note={content}")
    assert_error(as_meta, 2, kind)
    assert secret not in as_meta.stderr
    as_name = cli("store", "Harmless text", "--type", "fact", "--name", content)
    assert_error(as_name, 2, kind)
    directory = project_dir(home, repo)
    assert not directory.exists() or memory_files(directory) == []
    assert cli_json(cli("list", "--status", "all", "--json")) == []


def test_private_parts_are_stripped(cli: CLI) -> None:
    memory = store(cli, "Staging DB is db-staging:5433 <private>root pw hunter2</private> "
                        "reachable over the VPN", "fact")
    text = Path(memory["file"]).read_text()
    assert "hunter2" not in text and "private>" not in text
    assert "db-staging:5433" in text and "reachable over the VPN" in text
    assert search_ids(cli, "hunter2") == []
    assert search_ids(cli, "vpn") == [memory["id"]]


def test_error_outputs_have_hints_and_json_shapes(cli: CLI, tmp_path: Path) -> None:
    memory = store(cli, "A memory to poke at", "fact")
    cases: list[tuple[list[str], int, str]] = [
        (["store", "x", "--type", "bogus"], 2, "unknown_type"),
        (["store", "ghp_" + "Z9" * 18, "--type", "fact"], 2, "secret_detected"),
        (["store", "<private>only private</private>", "--type", "fact"], 2, "invalid_memory"),
        (["store", "x", "--type", "fact", "--relevance", "7"], 2, "invalid_memory"),
        (["store", "x", "--type", "fact", "--relevance", "very"], 2, "invalid_memory"),
        (["store", "x", "--type", "fact", "--meta", "novalue"], 2, "invalid_memory"),
        (["store", "x", "--type", "fact", "--meta", "type=fact"], 2, "invalid_memory"),
        (["get", "nosuchid"], 3, "not_found"),
        (["get", "../../etc/passwd.md"], 2, "path_traversal"),
        (["update", "nosuchid", "--content", "x"], 3, "not_found"),
        (["reclassify", memory["id"], "bogus"], 2, "unknown_type"),
        (["archive", "nosuchid"], 3, "not_found"),
        (["restore", "nosuchid"], 3, "not_found"),
        (["delete", "nosuchid"], 3, "not_found"),
        (["search", "x", "--limit", "0"], 2, "invalid_memory"),
        (["import", str(tmp_path / "nothing-here.jsonl")], 2, "invalid_memory"),
        (["adopt", "--from", str(tmp_path / "no-dir")], 2, "invalid_memory"),
    ]
    for args, exit_code, code in cases:
        assert_error(cli(*args), exit_code)
        json_error(cli(*args, "--json"), exit_code, code)


def test_usage_errors_have_hints(cli: CLI) -> None:
    """Argument errors are user errors too: they exit 2 and end with a hint."""
    for args in (["store", "x"], ["store", "x", "--type", "fact", "--scope", "nope"],
                 ["frobnicate"], ["search"], ["recent", "many"]):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "error:" in result.stderr
        assert any(line.startswith("hint:") for line in result.stderr.splitlines()), \
            (args, result.stderr)


# -- the files are the truth -----------------------------------------------------------------


def test_hand_edits_are_picked_up(cli: CLI, home: Path, repo: Path) -> None:
    edited = store(cli, "The cache layer uses Redis Sentinel", "fact")
    gone = store(cli, "The queue is RabbitMQ", "fact")
    renamed = store(cli, "Logs are shipped to Loki", "fact")
    directory = project_dir(home, repo)

    path = Path(edited["file"])
    path.write_text(path.read_text().replace("Redis Sentinel", "a Memcached cluster"))
    assert search_ids(cli, "memcached") == [edited["id"]]
    assert search_ids(cli, "sentinel") == []
    got = cli_json(cli("get", edited["id"], "--json"))
    assert isinstance(got, dict) and got["content"] == "The cache layer uses a Memcached cluster"

    Path(gone["file"]).unlink()
    assert search_ids(cli, "rabbitmq") == []
    assert_error(cli("get", gone["id"]), 3)

    (directory / "fact_zebra.md").write_text(
        "---\ntype: fact\ntags: [k8s]\n---\nThe staging cluster is named zebrafish.\n")
    new = cli_json(cli("search", "zebrafish", "--json"))
    assert isinstance(new, list) and len(new) == 1
    assert new[0]["memory"]["id"] == "fact_zebra"
    assert new[0]["memory"]["tags"] == ["k8s"]
    assert "fact_zebra.md" in (directory / "MEMORY.md").read_text()

    os.rename(renamed["file"], directory / "logging-notes.md")
    assert search_ids(cli, "loki") == [renamed["id"]]
    moved = cli_json(cli("get", renamed["id"], "--json"))
    assert isinstance(moved, dict) and moved["file"] == str(directory / "logging-notes.md")
    assert set(list_ids(cli)) == {edited["id"], renamed["id"], "fact_zebra"}


def test_project_option_selects_another_project(cli: CLI, home: Path, repo: Path,
                                                tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", "-b", "main", cwd=other)
    here = store(cli, "This repo builds with Bazel", "fact")
    there = store(cli, "The other project builds with Gradle", "fact", "--project", str(other))
    assert Path(there["file"]).parent == project_dir(home, other)

    assert search_ids(cli, "gradle") == []
    assert search_ids(cli, "gradle", "--project", str(other)) == [there["id"]]
    assert search_ids(cli, "bazel", "--project", str(other)) == []
    from_there = cli("search", "gradle", "--json", cwd=other)
    assert ids(cli_json(from_there)) == [there["id"]]
    assert list_ids(cli) == [here["id"]]
    assert list_ids(cli, "--project", str(other)) == [there["id"]]


def test_common_options_also_work_before_the_command(cli: CLI, home: Path, tmp_path: Path) -> None:
    kept = store(cli, "Staging deploys need the VPN", "fact")
    assert cli_json(cli("--json", "stats")) == cli_json(cli("stats", "--json"))
    other = tmp_path / "other-home"
    store(cli, "The other home has its own memories", "fact", "--home", str(other))
    for args in (["--home", str(other), "--json", "search", "memories"],
                 [f"--home={other}", "search", "memories", "--json"]):
        hits = cli_json(cli(*args))
        assert isinstance(hits, list) and [h["memory"]["content"] for h in hits] == [
            "The other home has its own memories"]
    hits = cli_json(cli("--home", str(home), "--json", "search", "staging"))
    assert isinstance(hits, list) and [h["memory"]["id"] for h in hits] == [kept["id"]]
    lonely = cli("--home", str(other))
    assert lonely.returncode == 2
    assert "options but no command" in lonely.stderr and "memdir --home DIR stats" in lonely.stderr
    unknown = cli("--type", "fact", "list")  # not a common option: still refused, with a hint
    assert unknown.returncode == 2 and "hint:" in unknown.stderr


def test_the_options_allowed_before_the_command_are_the_common_ones() -> None:
    from memdir.cli.parser import COMMON_FLAGS, COMMON_VALUED, _common

    actions = [a for a in _common()._actions if a.option_strings]
    assert sorted(a.option_strings[0] for a in actions if a.nargs != 0) == sorted(COMMON_VALUED)
    assert sorted(a.option_strings[0] for a in actions if a.nargs == 0) == sorted(COMMON_FLAGS)
