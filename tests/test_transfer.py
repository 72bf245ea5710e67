"""Export and import, through the library and the CLI: Markdown folders and JSON Lines,
lossless round trips, idempotent re-imports, bad items reported, hostile input contained."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CLI, cli_json, git
from memdir import Memdir, Memory
from memdir.core.markdown import parse
from memdir.core.paths import project_key

# Everything a memory carries that must survive a round trip (all but where it lives and the
# usage counters, which belong to the index of one home).
FIELDS = ("id", "name", "description", "type", "scope", "relevance", "tags", "paths", "source",
          "created", "updated", "reinforced", "status", "superseded_by", "meta", "date",
          "context", "content")

T0 = datetime(2024, 3, 4, 9, 30, 0, tzinfo=UTC)


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def portable(memory: Memory | dict[str, Any]) -> dict[str, Any]:
    data = memory.to_dict() if isinstance(memory, Memory) else memory
    return {key: data[key] for key in FIELDS}


def by_id(memories: list[Memory]) -> dict[str, dict[str, Any]]:
    out = {m.id: portable(m) for m in memories}
    assert len(out) == len(memories), "ids must be unique"
    return out


def memory_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.md") if p.name != "MEMORY.md")


def all_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def other(tmp_path: Path) -> Path:
    """A second project (a real git repo) to import into: its team directory is its own."""
    path = tmp_path / "other"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    return path


HAND_WRITTEN = """---
name: Release checklist
description: What to check before tagging a release
type: procedure
priority: p1
links: [https://example.com/runbook, "#releases"]
reviewed: 2024-02-01
owner:
  team: platform
  oncall: true
created: 2024-01-15T12:00:00Z
---
1. Run the full test suite.
2. Bump the version in pyproject.toml.
"""


@pytest.fixture
def source(tmp_path: Path, repo: Path) -> Iterator[tuple[Memdir, list[Memory]]]:
    """A home with memories of every shape: all scopes, updated, reinforced, archived, meta,
    paths, a word relevance, and a hand-written file with keys memdir does not know."""
    clock = Clock(T0)
    with Memdir(home=tmp_path / "src-home", project=repo, clock=clock,
                sync_interval=0) as md:
        decision = md.store(
            "Deployments use ArgoCD.\n\nWe rejected Flux: no UI.", type="decision",
            name="CD tool", description="ArgoCD deploys every service",
            tags=["infra", "ci"], paths=["deploy/**", "k8s/*.yaml"], relevance=0.65,
            meta={"ticket": "OPS-42", "owners": ["ana", "bo"], "nested": {"n": 1, "ok": True},
                  "ratio": 0.25, "nothing": None})
        clock.advance(days=3)
        md.update(decision.id, content="Deployments use ArgoCD.\n\nWe rejected Flux: no UI. "
                  "Rollbacks are one click.")
        clock.advance(hours=5)
        fact = md.store("The CI runners have 16 GB of RAM", type="fact", relevance="high")
        clock.advance(minutes=1)
        md.store("the CI runners have 16 gb of ram", type="fact")
        clock.advance(minutes=1)
        md.update(fact.id, reinforce=True)
        clock.advance(days=1)
        pitfall = md.store("Never run migrations during the Friday deploy window", type="pitfall",
                           tags=["db"])
        clock.advance(days=2)
        md.archive(pitfall.id)
        md.store("Prefers short commit messages in the imperative", type="preference",
                 scope="user")
        md.store("All services expose /healthz", type="policy", scope="team", paths=["svc/**"])
        (md.directory("project").path / "procedure_release.md").write_text(HAND_WRITTEN)
        memories = md.list(status="all")
        yield md, memories


def test_source_fixture_has_every_shape(source: tuple[Memdir, list[Memory]]) -> None:
    _, memories = source
    assert len(memories) == 6
    assert {m.scope for m in memories} == {"user", "project", "team"}
    assert {m.status for m in memories} == {"active", "archived"}
    assert max(m.reinforced for m in memories) == 2
    assert any(m.created != m.updated for m in memories)
    hand = next(m for m in memories if m.id == "procedure_release")
    assert hand.meta["priority"] == "p1" and hand.meta["owner"] == {"team": "platform",
                                                                    "oncall": True}


# -- library ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["markdown", "jsonl"])
def test_export_import_is_lossless(source: tuple[Memdir, list[Memory]], tmp_path: Path,
                                   other: Path, fmt: str) -> None:
    md, memories = source
    dest = tmp_path / ("export" if fmt == "markdown" else "export.jsonl")
    assert md.export(dest, format=fmt) == len(memories)

    with Memdir(home=tmp_path / "dst-home", project=other, sync_interval=0) as target:
        report = target.import_(dest)
        assert report.errors == [] and report.skipped == []
        assert len(report.imported) == len(memories)
        assert by_id(target.list(status="all")) == by_id(memories)

        # The files written are memdir files that parse back to the same memories.
        for memory in target.list(status="all"):
            assert memory.path is not None
            assert memory.path.parent == target.directory(memory.scope).path
            reread = parse(memory.path.read_text(), stem=memory.path.stem, scope=memory.scope)
            assert portable(reread) == portable(memory)
        assert target.doctor() == []

        # Importing the same export again adds nothing.
        files = all_files(tmp_path / "dst-home") | all_files(other)
        again = target.import_(dest)
        assert again.imported == [] and again.errors == []
        assert len(again.skipped) == len(memories)
        assert len(target.list(status="all")) == len(memories)
        assert {p for p in all_files(tmp_path / "dst-home") | all_files(other)
                if p.suffix == ".md"} == {p for p in files if p.suffix == ".md"}


def test_markdown_export_layout(source: tuple[Memdir, list[Memory]], tmp_path: Path) -> None:
    md, memories = source
    dest = tmp_path / "export"
    md.export(dest)
    exported = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.md"))
    assert exported == sorted(f"{m.scope}/{m.file}" for m in memories)
    for memory in memories:
        text = (dest / memory.scope / memory.file).read_text()
        assert portable(parse(text, stem=Path(memory.file).stem, scope=memory.scope)) == \
            portable(memory)
    # Only the scopes asked for.
    only_user = tmp_path / "only-user"
    assert md.export(only_user, scopes=["user"]) == 1
    assert [p.parent.name for p in only_user.rglob("*.md")] == ["user"]


def test_jsonl_export_shape(source: tuple[Memdir, list[Memory]], tmp_path: Path) -> None:
    md, memories = source
    dest = tmp_path / "export.jsonl"
    md.export(dest, format="jsonl")
    lines = dest.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(memories)
    items = [json.loads(line) for line in lines]
    for item in items:
        assert set(item) == set(FIELDS)  # no file, no usage counters
    assert {i["id"]: i for i in items} == by_id(memories)


def test_import_is_idempotent_by_content_too(md: Memdir, tmp_path: Path) -> None:
    kept = md.store("Feature flags live in LaunchDarkly", type="reference")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"type": "reference", "content": "feature FLAGS live in\n"
                                                               "LaunchDarkly"}) + "\n"
                   + json.dumps({"type": "fact", "content": "A new fact"}) + "\n"
                   + json.dumps({"type": "fact", "content": "a  new FACT"}) + "\n")
    report = md.import_(src)
    assert [m.body for m in report.imported] == ["A new fact"]
    assert [why for _, why in report.skipped] == ["same content already stored"] * 2
    assert report.errors == []
    assert len(md.list()) == 2
    assert md.get(kept.id).reinforced == 0  # a skip is not a reinforcement


BAD_LINES = [
    json.dumps({"id": "goodone1", "type": "fact", "content": "Good item number one"}),
    "this is not json {",
    json.dumps({"type": "nonsense", "content": "An item with an unknown type"}),
    json.dumps({"type": "fact", "content": "Our key is AKIAIOSFODNN7EXAMPL3 for uploads"}),
    "[1, 2, 3]",
    json.dumps({"type": "fact"}),
    json.dumps({"type": "fact", "content": "Relevance out of range", "relevance": 7}),
    json.dumps({"type": "fact", "content": "Bad status", "status": "deleted"}),
    json.dumps({"type": "fact", "content": "Meta is a list", "meta": ["x"]}),
    json.dumps({"type": "fact", "content": "Meta shadows a field", "meta": {"id": "x"}}),
    json.dumps({"type": "fact", "content": "Password in a tag", "tags": ["password=Hunter2x9"]}),
    "",
    json.dumps({"id": "goodone2", "type": "decision", "content": "Good item number two"}),
]
# line number -> a word the reason must contain
BAD_REASONS = {2: "", 3: "unknown memory type", 4: "AWS", 5: "JSON object", 6: "content",
               7: "relevance", 8: "status", 9: "meta", 10: "meta", 11: "password"}
BAD_WORDS = ("unknown type", "AKIAIOSFODNN7EXAMPL3", "Relevance out of range", "Bad status",
             "Meta is a list", "Meta shadows", "Hunter2x9", "Password in a tag")


def test_bad_items_are_reported_and_the_rest_imported(md: Memdir, tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(BAD_LINES) + "\n", encoding="utf-8")
    report = md.import_(src)

    assert sorted(m.id for m in report.imported) == ["goodone1", "goodone2"]
    assert report.skipped == []
    where = dict(report.errors)
    assert set(where) == {f"bad.jsonl:{n}" for n in BAD_REASONS}
    for n, word in BAD_REASONS.items():
        assert word.lower() in where[f"bad.jsonl:{n}"].lower(), (n, where[f"bad.jsonl:{n}"])
    assert "AKIAIOSFODNN7EXAMPL3" not in json.dumps(report.to_dict())
    assert "Hunter2x9" not in json.dumps(report.to_dict())

    directory = md.directory("project").path
    files = memory_files(directory)
    assert len(files) == 2
    on_disk = "".join(p.read_text() for p in all_files(tmp_path / "memdir-home")
                      if p.suffix in (".md", ".orig"))
    for word in BAD_WORDS:
        assert word not in on_disk, word
    assert sorted(m.id for m in md.list(status="all")) == ["goodone1", "goodone2"]
    assert md.search("unknown") == []


def test_imported_values_are_normalised_into_readable_files(md: Memdir, tmp_path: Path) -> None:
    """Loose but meaningful values are accepted; whatever is written, memdir can read back."""
    src = tmp_path / "loose.jsonl"
    items = [
        {"type": "facts", "content": "Plural type and word relevance", "relevance": "low"},
        {"type": "fact", "content": "Tags given as one string", "tags": "a, b"},
        {"type": "fact", "content": "A date-only created", "created": "2024-02-03"},
        {"type": "fact", "content": "Private <private>do not keep</private>part stripped"},
    ]
    src.write_text("".join(json.dumps(i) + "\n" for i in items))
    report = md.import_(src)
    assert report.errors == []
    assert len(report.imported) == len(items)
    got = {m.body: m for m in md.list()}
    assert got["Plural type and word relevance"].type == "fact"
    assert got["Plural type and word relevance"].relevance == 0.3
    assert got["Tags given as one string"].tags == ("a", "b")
    assert got["A date-only created"].created == datetime(2024, 2, 3, tzinfo=UTC)
    assert "Private part stripped" in got
    assert all("do not keep" not in m.path.read_text() for m in md.list() if m.path)
    assert md.reindex() == len(items)
    assert md.doctor() == []


def test_imported_files_can_always_be_read_back(md: Memdir, tmp_path: Path) -> None:
    """An item is either refused (and reported) or written as a file memdir itself can parse:
    a rebuild of the index from the files alone must find every imported memory."""
    src = tmp_path / "odd.jsonl"
    items = [
        {"type": "fact", "content": "Reinforced given as a boolean", "reinforced": True},
        {"type": "fact", "content": "Reinforced given as a float", "reinforced": 2.5},
        {"type": "fact", "content": "Superseded by a number", "superseded_by": 7},
        {"type": "fact", "content": "Id is a number", "id": 12345},
        {"type": "fact", "content": "Relevance is a bool", "relevance": True},
        {"type": "fact", "content": "Meta with odd values",
         "meta": {"when": "2024-01-01", "yes": "yes", "multi": "a\n---\nb", "empty": ""}},
    ]
    src.write_text("".join(json.dumps(i) + "\n" for i in items))
    report = md.import_(src)
    assert len(report.imported) + len(report.errors) == len(items)
    imported = {m.id: portable(m) for m in md.list(status="all")}
    assert len(imported) == len(report.imported)

    assert md.reindex() == len(report.imported)
    assert md.doctor() == []
    assert {m.id: portable(m) for m in md.list(status="all")} == imported
    for memory in md.list(status="all"):
        assert memory.path is not None
        reread = parse(memory.path.read_text(), stem=memory.path.stem)
        assert isinstance(reread.reinforced, int) and not isinstance(reread.reinforced, bool)


def test_non_string_fields_are_reported_not_fatal(md: Memdir, tmp_path: Path) -> None:
    """Fields of the wrong JSON type never abort the whole import: each line is imported or
    reported, the good lines around it are imported, and what is written reads back."""
    src = tmp_path / "types.jsonl"
    items = [
        {"type": "fact", "content": "Good before"},
        {"type": "fact", "content": "Name is a number", "name": 42},
        {"type": "fact", "content": "Description is a list", "description": ["x"]},
        {"type": "fact", "content": "Tags is a number", "tags": 5},
        {"type": "fact", "content": "Paths is a number", "paths": 3.5},
        {"type": "fact", "content": ["content", "is", "a", "list"]},
        {"type": 12, "content": "Type is a number"},
        {"type": "fact", "content": "Good after"},
    ]
    src.write_text("".join(json.dumps(i) + "\n" for i in items))
    report = md.import_(src)
    bodies = {m.body for m in report.imported}
    assert {"Good before", "Good after"} <= bodies
    assert len(report.imported) + len(report.errors) == len(items)
    assert {w for w, _ in report.errors} >= {"types.jsonl:6", "types.jsonl:7"}
    assert md.reindex() == len(report.imported)
    assert md.doctor() == []


def test_hostile_file_fields_write_nothing_outside(md: Memdir, tmp_path: Path) -> None:
    before = all_files(tmp_path)
    src = tmp_path / "hostile.jsonl"
    items = [
        {"type": "fact", "content": "Hostile file field", "file": "../../x.md"},
        {"type": "fact", "content": "Hostile absolute file", "file": "/tmp/escape-x.md",
         "path": "../../../y.md"},
        {"type": "fact", "content": "Hostile name", "name": "../../../../x",
         "id": "../../z"},
        {"type": "fact", "content": "Hostile scope", "scope": "../../.ssh"},
    ]
    src.write_text("".join(json.dumps(i) + "\n" for i in items))
    report = md.import_(src)
    assert report.errors == [] and len(report.imported) == 4

    directory = md.directory("project").path
    home = tmp_path / "memdir-home"
    for memory in report.imported:
        assert memory.path is not None and memory.path.parent == directory
    new = all_files(tmp_path) - before - {src}
    assert new, "the import wrote files"
    for path in new:
        assert path.is_relative_to(home), path
        assert path.parent in (home, directory), path
    assert not list(tmp_path.rglob("x.md"))
    assert not Path("/tmp/escape-x.md").exists()
    assert {m.scope for m in report.imported} == {"project"}


def test_import_folder_with_a_broken_file(md: Memdir, tmp_path: Path) -> None:
    folder = tmp_path / "incoming"
    (folder / "user").mkdir(parents=True)
    (folder / "nested" / "deeper").mkdir(parents=True)
    (folder / "user" / "preference_x.md").write_text(
        "---\ntype: preference\n---\nLikes dark mode\n")
    (folder / "nested" / "deeper" / "fact_y.md").write_text(
        "---\ntype: fact\nscope: user\n---\nThe VPN needs a hardware key\n")
    (folder / "fact_z.md").write_text("---\ntype: fact\n---\nThe wiki is on Confluence\n")
    (folder / "broken.md").write_text("---\ntype: [fact\n---\nBroken\n")
    (folder / "MEMORY.md").write_text("# not a memory\n")
    (folder / "notes.txt").write_text("ignored\n")
    report = md.import_(folder)
    assert [Path(w).name for w, _ in report.errors] == ["broken.md"]
    got = {m.body: m.scope for m in report.imported}
    assert got == {"Likes dark mode": "user", "The VPN needs a hardware key": "user",
                   "The wiki is on Confluence": "project"}
    assert [m.id for m in md.list(scopes=["user"], order="name")] == ["fact_y", "preference_x"]
    assert (folder / "broken.md").read_text() == "---\ntype: [fact\n---\nBroken\n"


def test_import_scope_user_puts_everything_in_user(source: tuple[Memdir, list[Memory]],
                                                   tmp_path: Path, other: Path) -> None:
    md, memories = source
    dest = tmp_path / "export.jsonl"
    md.export(dest, format="jsonl")
    with Memdir(home=tmp_path / "dst-home", project=other, sync_interval=0) as target:
        report = target.import_(dest, scope="user")
        assert report.errors == [] and len(report.imported) == len(memories)
        assert {m.scope for m in target.list(status="all")} == {"user"}
        assert len(memory_files(tmp_path / "dst-home" / "user")) == len(memories)
        assert target.list(scopes=["project", "team"], status="all") == []
        assert not (other / ".memdir").exists()
        want = {k: {**v, "scope": "user"} for k, v in by_id(memories).items()}
        assert by_id(target.list(status="all")) == want


def test_round_trip_keeps_hand_written_text_verbatim(md: Memdir, tmp_path: Path,
                                                     other: Path) -> None:
    """Import re-validates, but must not rewrite a memory's words: a hand-written (or adopted
    Claude Code) memory that says 'yesterday' or 'next Friday' comes back the same."""
    directory = md.directory("project").path
    directory.mkdir(parents=True)
    (directory / "project_standup.md").write_text(
        "---\nname: Standup notes\ntype: project\ncreated: 2024-03-05T10:00:00Z\n---\n"
        "We said yesterday that the release ships next Friday.\n")
    memories = md.list()
    assert len(memories) == 1
    dest = tmp_path / "export.jsonl"
    md.export(dest, format="jsonl")
    with Memdir(home=tmp_path / "dst-home", project=other, sync_interval=0) as target:
        report = target.import_(dest)
        assert report.errors == []
        assert by_id(target.list()) == by_id(memories)


# -- CLI -------------------------------------------------------------------------------------


def cli_store(cli: CLI, content: str, *args: str) -> dict[str, Any]:
    out = cli_json(cli("store", content, *args, "--json"))
    assert isinstance(out, dict)
    memory = out["memory"]
    assert isinstance(memory, dict)
    return memory


def listing(cli: CLI, *args: str) -> dict[str, dict[str, Any]]:
    items = cli_json(cli("list", "--status", "all", "--json", *args))
    assert isinstance(items, list)
    return {i["id"]: portable(i) for i in items}


def test_cli_export_and_import_jsonl_and_markdown(cli: CLI, repo: Path,
                                                  tmp_path: Path) -> None:
    cli_store(cli, "Deployments use ArgoCD", "--type", "decision", "--tags", "infra",
              "--paths", "deploy/**", "--relevance", "high", "--meta", "ticket=OPS-1")
    archived = cli_store(cli, "Staging is reset every night", "--type", "fact")
    assert cli("archive", archived["id"]).returncode == 0
    reinforced = cli_store(cli, "The user likes terse answers", "--type", "preference",
                           "--scope", "user")
    assert cli("update", reinforced["id"], "--reinforce").returncode == 0
    source = listing(cli)
    assert len(source) == 3

    exported = cli("export", "out.jsonl")
    assert exported.returncode == 0, exported.stderr
    assert "exported 3 memories" in exported.stdout and "jsonl" in exported.stdout
    jsonl = (repo / "out.jsonl").read_text(encoding="utf-8")
    assert {json.loads(line)["id"]: json.loads(line) for line in jsonl.splitlines()} == source

    to_stdout = cli("export", "-")
    assert to_stdout.returncode == 0 and to_stdout.stderr == ""
    assert to_stdout.stdout == jsonl

    as_json = cli_json(cli("export", str(tmp_path / "md-out"), "--json"))
    assert as_json == {"exported": 3, "dest": str(tmp_path / "md-out"), "format": "markdown"}
    assert len(list((tmp_path / "md-out").rglob("*.md"))) == 3
    forced = cli("export", str(tmp_path / "forced.txt"), "--format", "jsonl")
    assert forced.returncode == 0
    assert (tmp_path / "forced.txt").read_text() == jsonl
    only_user = cli("export", "-", "--scope", "user")
    assert [json.loads(line)["id"] for line in only_user.stdout.splitlines()] == \
        [reinforced["id"]]

    for name, src in (("jsonl-home", str(repo / "out.jsonl")),
                      ("md-home", str(tmp_path / "md-out"))):
        home2 = str(tmp_path / name)
        result = cli("import", src, "--home", home2)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("imported 3, skipped 0, errors 0")
        assert listing(cli, "--home", home2) == source
        again = cli_json(cli("import", src, "--home", home2, "--json"))
        assert isinstance(again, dict)
        assert again["imported"] == 0 and len(again["skipped"]) == 3 and again["errors"] == []
        assert listing(cli, "--home", home2) == source

    home3 = str(tmp_path / "stdin-home")
    piped = cli("import", "-", "--home", home3, "--scope", "user", input=jsonl)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("imported 3")
    moved = listing(cli, "--home", home3)
    assert moved == {k: {**v, "scope": "user"} for k, v in source.items()}
    assert len(memory_files(Path(home3) / "user")) == 3
    assert not (Path(home3) / "projects").exists() or not any(
        (Path(home3) / "projects").rglob("*.md"))


def test_cli_import_reports_bad_lines(cli: CLI, home: Path, repo: Path,
                                      tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(BAD_LINES) + "\n", encoding="utf-8")
    result = cli("import", str(src))
    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == f"imported 2, skipped 0, errors {len(BAD_REASONS)}"
    for n in BAD_REASONS:
        assert f"error bad.jsonl:{n}: " in result.stdout, n
    assert "unknown memory type 'nonsense'" in result.stdout
    assert "AKIAIOSFODNN7EXAMPL3" not in result.stdout + result.stderr

    as_json = cli("import", str(src), "--json", "--home", str(tmp_path / "h2"))
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["imported"] == 2
    assert sorted(e["where"] for e in report["errors"]) == \
        sorted(f"bad.jsonl:{n}" for n in BAD_REASONS)

    directory = home / "projects" / project_key(repo.resolve())
    assert sorted(frontmatter_id(p) for p in memory_files(directory)) == ["goodone1", "goodone2"]
    text = "".join(p.read_text() for p in directory.iterdir() if p.is_file())
    for word in BAD_WORDS:
        assert word not in text, word


def frontmatter_id(path: Path) -> str:
    front = path.read_text().split("\n---\n", 1)[0].removeprefix("---\n")
    value = yaml.safe_load(front)["id"]
    assert isinstance(value, str)
    return value


def test_cli_hostile_file_field(cli: CLI, home: Path, repo: Path, tmp_path: Path) -> None:
    before = all_files(tmp_path)
    line = json.dumps({"type": "fact", "content": "Hostile CLI import", "file": "../../x.md",
                       "name": "../../x"})
    result = cli("import", "-", input=line + "\n")
    assert result.returncode == 0, result.stderr
    directory = home / "projects" / project_key(repo.resolve())
    new = all_files(tmp_path) - before
    assert new
    assert all(p.parent in (home, directory) for p in new), new
    assert not list(tmp_path.rglob("x.md"))
    assert [p.name for p in memory_files(directory)] == ["fact_x.md"]


# -- every item validated before anything is written -----------------------------------------

GOOD_LINES = (json.dumps({"type": "fact", "content": "Good line before the bad one"}),
              json.dumps({"type": "decision", "content": "Good line after the bad one"}))

# A line that used to fail only while being written (or while being read), aborting the whole
# import: label -> (the line's bytes, a word the reason must contain).
WRITE_TIME_FAILURES: dict[str, tuple[bytes, str]] = {
    "JSON nested too deeply": (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
    "an integer with too many digits": (
        b'{"type": "fact", "content": "huge", "relevance": ' + b"9" * 5000 + b"}", "not JSON"),
    "a line that is not UTF-8": (b'{"type": "fact", "content": "caf\xe9 au lait"}',
                                 "not UTF-8"),
    "superseded_by an object": (json.dumps({"type": "fact", "content": "Superseded by a map",
                                            "superseded_by": {"a": 1}}).encode(),
                                "superseded_by"),
    "superseded_by a number": (json.dumps({"type": "fact", "content": "Superseded by 7",
                                           "superseded_by": 7}).encode(), "superseded_by"),
    "created overflows UTC": (json.dumps({"type": "fact", "content": "Created in year 0",
                                          "created": "0001-01-01T00:00:00+01:00"}).encode(),
                              "out of range"),
    "updated overflows UTC": (json.dumps({"type": "fact", "content": "Updated in year 10000",
                                          "updated": "9999-12-31T23:30:00-01:00"}).encode(),
                              "out of range"),
    "reinforced beyond SQLite's 64 bits": (
        json.dumps({"type": "fact", "content": "Reinforced a lot", "reinforced": 10**30}
                   ).encode(), "too large"),
    "an id with a lone surrogate": (json.dumps({"type": "fact", "content": "Odd id",
                                                "id": "ab\ud800cd"}).encode(),
                                    "not valid Unicode"),
}


@pytest.mark.parametrize("label", list(WRITE_TIME_FAILURES))
def test_cli_one_bad_item_is_reported_and_the_rest_imported(cli: CLI, tmp_path: Path,
                                                            label: str) -> None:
    """No item can abort the import (it used to end in 'internal error', exit 70, with
    nothing imported): the bad line is reported with its number and a hint, the rest go in."""
    bad, word = WRITE_TIME_FAILURES[label]
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join([GOOD_LINES[0].encode(), bad, GOOD_LINES[1].encode()]) + b"\n")
    result = cli("import", str(src), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["imported"] == 2 and report["skipped"] == []
    assert [e["where"] for e in report["errors"]] == ["in.jsonl:2"]
    reason = report["errors"][0]["error"]
    assert word in reason and "(" in reason, reason  # why, and (how to fix it)
    assert sorted(m["content"] for m in listing_raw(cli)) == sorted(
        json.loads(line)["content"] for line in GOOD_LINES)
    assert cli("doctor").returncode == 0


def listing_raw(cli: CLI, *args: str) -> list[dict[str, Any]]:
    items = cli_json(cli("list", "--status", "all", "--json", *args))
    assert isinstance(items, list)
    return items


def test_cli_import_accepts_a_utf8_bom(cli: CLI, tmp_path: Path) -> None:
    src = tmp_path / "bom.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(GOOD_LINES).encode() + b"\r\n")
    result = cli("import", str(src))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("imported 2, skipped 0, errors 0")


def test_cli_folder_items_that_would_fail_at_write_are_reported(cli: CLI,
                                                                tmp_path: Path) -> None:
    """The same checks hold for a folder of Markdown files: each bad file is reported (with
    its name and a hint), the good ones are imported."""
    folder = tmp_path / "incoming"
    folder.mkdir()
    bad = {
        "old.md": ("created: 0001-01-01T00:00:00+01:00", "out of range"),
        "many.md": ("reinforced: 100000000000000000000000000", "too large"),
        "datekey.md": ("2024-01-01: a date as a key", "key 2024-01-01 is not text"),
        "secretid.md": ("id: ghp_" + "a1B2" * 9, "secret"),
    }
    for name, (line, _) in bad.items():
        (folder / name).write_text(f"---\ntype: fact\n{line}\n---\nThe file {name}\n")
    (folder / "good.md").write_text("---\ntype: fact\nreinforced: 3\n---\nA good file\n")
    result = cli("import", str(folder), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["imported"] == 1
    errors = {Path(e["where"]).name: e["error"] for e in report["errors"]}
    assert set(errors) == set(bad)
    for name, (_, word) in bad.items():
        assert word in errors[name] and "(" in errors[name], errors[name]
    assert "a1B2a1B2" not in result.stdout
    assert [(m["content"], m["reinforced"]) for m in listing_raw(cli)] == [("A good file", 3)]
    assert cli("doctor").returncode == 0


def test_cli_partial_import_reports_exactly_what_was_written(cli: CLI, home: Path,
                                                             repo: Path,
                                                             tmp_path: Path) -> None:
    """The user scope is written, then the project scope's write fails (its directory is a
    file): the report says the user item was imported and the project item was not (it used
    to be 'internal error', exit 70, though the user item was stored)."""
    assert cli("stats").returncode == 0  # the home exists
    blocked = home / "projects" / project_key(repo.resolve())
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("not a directory\n")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"type": "fact", "scope": "user", "content": "User item"}) + "\n"
                   + json.dumps({"type": "fact", "content": "Project item"}) + "\n")
    result = cli("import", str(src), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["imported"] == 1 and report["skipped"] == []
    assert [e["where"] for e in report["errors"]] == ["in.jsonl:2"]
    assert "not imported" in report["errors"][0]["error"]
    assert [m["content"] for m in listing_raw(cli, "--scope", "user")] == ["User item"]

    blocked.unlink()  # the cause fixed, the same import again brings in only what was missing
    again = cli_json(cli("import", str(src), "--json"))
    assert again == {"imported": 1, "errors": [],
                     "skipped": [{"where": "in.jsonl:1", "why": "same content already stored"}]}


def test_jsonl_invalid_values_are_errors_not_defaults(md: Memdir, tmp_path: Path) -> None:
    """A value that is present but invalid is reported, as in a Markdown file; it used to be
    replaced silently (created: now, reinforced: 0)."""
    src = tmp_path / "in.jsonl"
    items = [
        {"type": "fact", "content": "Created is a phrase", "created": "last tuesday"},
        {"type": "fact", "content": "Created is a number", "created": 1700000000},
        {"type": "fact", "content": "Updated is a phrase", "updated": "soon"},
        {"type": "fact", "content": "Reinforced is text", "reinforced": "3"},
        {"type": "fact", "content": "Reinforced is negative", "reinforced": -5},
        {"type": "fact", "content": "Reinforced is a float", "reinforced": 2.5},
        {"type": "fact", "content": "Reinforced is a bool", "reinforced": True},
        {"type": "fact", "content": "Meta is an empty list", "meta": []},
        {"type": "fact", "content": "Id is a list", "id": ["x"]},
        {"type": "fact", "content": "Null values mean absent", "created": None,
         "reinforced": None, "status": None, "meta": None, "superseded_by": None},
    ]
    words = ["created", "created", "updated", "reinforced", "reinforced", "reinforced",
             "reinforced", "meta", "id"]
    src.write_text("".join(json.dumps(i) + "\n" for i in items))
    report = md.import_(src)
    assert [m.body for m in report.imported] == ["Null values mean absent"]
    assert [w for w, _ in report.errors] == [f"in.jsonl:{n}" for n in range(1, len(words) + 1)]
    for (_, reason), word in zip(report.errors, words, strict=True):
        assert f"'{word}'" in reason and "(" in reason, reason
    assert [m.body for m in md.list(status="all")] == ["Null values mean absent"]


def test_cli_export_user_mistakes_are_errors_with_a_hint(cli: CLI, repo: Path,
                                                         tmp_path: Path) -> None:
    """Each used to be 'internal error ... report it' (exit 70)."""
    cli_store(cli, "Something to export", "--type", "fact")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir.jsonl").mkdir()
    for args in ((str(tmp_path / "afile"),),  # Markdown onto a file
                 (str(tmp_path / "afile" / "sub"),),  # a folder under a file
                 (str(tmp_path / "adir.jsonl"),),  # JSON Lines onto a folder
                 (str(tmp_path / "missing" / "x.jsonl"),),  # JSON Lines, no such folder
                 ("-", "--format", "markdown")):  # Markdown to stdout
        result = cli("export", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("error: ") and "\nhint: " in result.stderr, args
        assert "internal error" not in result.stderr
    as_json = cli("export", str(tmp_path / "missing" / "x.jsonl"), "--json")
    assert as_json.returncode == 2
    error = json.loads(as_json.stderr)["error"]
    assert "does not exist" in error["message"] and error["hint"]
    assert (tmp_path / "afile").read_text() == "x"
    assert list((tmp_path / "adir.jsonl").iterdir()) == []
    assert not (tmp_path / "missing").exists()


HAND_TYPED = """---
id: handw001
name: Hand written
type: fact
created: 2025-11-30T08:00:00Z
reviewed: 2026-01-15
deadline: 2026-02-01T09:30:00Z
7: seven
nested: {when: 2025-12-01, at: [2025-12-02, 3]}
flag: yes
---
A file with YAML types in keys memdir does not know
"""


def test_markdown_round_trip_keeps_yaml_types_of_unknown_keys(cli: CLI, home: Path,
                                                              repo: Path,
                                                              tmp_path: Path) -> None:
    """Dates stay dates, integer keys stay integers, at any depth (they used to come back
    as strings: the import went through the JSON shape of the memory)."""
    cli_store(cli, "A placeholder", "--type", "fact")
    source = home / "projects" / project_key(repo.resolve()) / "fact_hand-written.md"
    source.write_text(HAND_TYPED)
    want = parse(HAND_TYPED, stem="x").meta
    assert want["reviewed"] == date(2026, 1, 15) and 7 in want and want["flag"] is True
    dest = tmp_path / "export"
    assert cli("export", str(dest)).returncode == 0

    home2 = tmp_path / "home2"
    result = cli("import", str(dest), "--home", str(home2))
    assert result.returncode == 0, result.stdout + result.stderr
    imported = list((home2 / "projects").rglob("fact_hand-written*.md"))
    assert len(imported) == 1
    assert parse(imported[0].read_text(), stem="x").meta == want
    assert listing(cli, "--home", str(home2)) == listing(cli)
    assert cli("doctor", "--home", str(home2)).returncode == 0


def test_markdown_export_refuses_a_folder_holding_other_files(cli: CLI,
                                                              tmp_path: Path) -> None:
    """Files of an older export (of memories deleted since) would come back with the next
    import of the folder: such a folder is refused, and nothing is written into it."""
    first = cli_store(cli, "Memory A", "--type", "fact")
    cli_store(cli, "Memory B", "--type", "fact")
    dest = tmp_path / "backup"
    assert cli("export", str(dest)).returncode == 0
    again = cli("export", str(dest))  # the same export again: the same files
    assert again.returncode == 0, again.stderr
    before = {p: p.read_bytes() for p in all_files(dest)}

    assert cli("delete", first["id"]).returncode == 0
    stale = cli("export", str(dest))
    assert stale.returncode == 2
    assert "fact_memory-a.md" in stale.stderr and "empty folder" in stale.stderr
    only_user = cli("export", str(dest), "--scope", "user")
    assert only_user.returncode == 2
    assert {p: p.read_bytes() for p in all_files(dest)} == before

    other = tmp_path / "with-notes"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    assert cli("export", str(other)).returncode == 2
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]

    fresh = tmp_path / "fresh"
    assert cli("export", str(fresh)).returncode == 0
    assert [p.name for p in fresh.rglob("*.md")] == ["fact_memory-b.md"]


def test_an_empty_markdown_export_is_an_empty_folder(cli: CLI, tmp_path: Path) -> None:
    dest = tmp_path / "empty-export"
    result = cli("export", str(dest))
    assert result.returncode == 0 and result.stdout.startswith("exported 0 memories")
    assert dest.is_dir() and list(dest.iterdir()) == []
    back = cli("import", str(dest))
    assert back.returncode == 0 and back.stdout.startswith("imported 0, skipped 0, errors 0")


def test_errors_found_while_reading_keep_their_hint(md: Memdir, tmp_path: Path) -> None:
    folder = tmp_path / "incoming"
    folder.mkdir()
    (folder / "broken.md").write_text("---\ntype: [fact\n---\nBroken\n")
    (folder / "latin1.md").write_bytes(b"---\ntype: fact\n---\ncaf\xe9\n")
    (folder / "fine.md").write_text("---\ntype: fact\n---\nFine\n")
    report = md.import_(folder)
    assert [m.body for m in report.imported] == ["Fine"]
    errors = {Path(w).name: e for w, e in report.errors}
    assert "invalid YAML" in errors["broken.md"] and "Fix the YAML frontmatter" in \
        errors["broken.md"]
    assert "not UTF-8" in errors["latin1.md"] and "save the file as UTF-8" in errors["latin1.md"]

    src = tmp_path / "in.jsonl"
    src.write_text("not json\n[1]\n")
    lines = dict(md.import_(src).errors)
    assert "one JSON object on its own line" in lines["in.jsonl:1"]
    assert "one JSON object on its own line" in lines["in.jsonl:2"]


def test_cli_import_of_one_markdown_file(cli: CLI, tmp_path: Path) -> None:
    """A single .md file is a memory file (it used to be read as JSON Lines, line by line)."""
    note = tmp_path / "note.md"
    note.write_text("---\ntype: fact\nscope: user\n---\nA single Markdown file\n")
    result = cli("import", str(note))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("imported 1, skipped 0, errors 0")
    assert [m["content"] for m in listing_raw(cli, "--scope", "user")] == \
        ["A single Markdown file"]


def test_import_into_postgres_checks_what_the_database_cannot_hold(tmp_path: Path) -> None:
    """PostgreSQL refuses NUL in text and counts above 32 bits: such an item is reported,
    the rest imported (the whole import used to fail)."""
    pytest.importorskip("psycopg")
    import psycopg

    from memdir.team.postgres import PostgresStore
    from memdir.upkeep.transfer import import_memories
    from pg_support import DSN, fresh_schema

    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.Error:
        pytest.skip("no PostgreSQL at MEMDIR_TEST_DATABASE")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(i) + "\n" for i in [
        {"type": "fact", "content": "Good for the database"},
        {"type": "fact", "content": "A NUL \u0000 inside"},
        {"type": "fact", "content": "A NUL in meta", "meta": {"k": ["a\u0000b"]}},
        {"type": "fact", "content": "Reinforced past 32 bits", "reinforced": 2**31},
    ]))
    with fresh_schema() as schema, PostgresStore(DSN, schema=schema) as pg:
        report = import_memories(pg, src)
        assert [m.body for m in report.imported] == ["Good for the database"]
        assert [w for w, _ in report.errors] == ["in.jsonl:2", "in.jsonl:3", "in.jsonl:4"]
        assert "NUL" in report.errors[0][1] and "too large" in report.errors[2][1]
        assert [m.body for m in pg.list(status="all")] == ["Good for the database"]
