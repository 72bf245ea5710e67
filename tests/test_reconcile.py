"""The index follows the files: hand edits, new files, deletions, renames, broken files,
and a rebuild from the files alone."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from conftest import CLI
from memdir import Memdir

HAND_WRITTEN = """---
name: Hand written
description: Written in vim, not by memdir
type: reference
---
The on-call rota lives in PagerDuty under schedule OPS-PRIMARY.
"""


def test_hand_edit_is_found_by_new_words_not_old(md: Memdir) -> None:
    memory = md.store("The queue is RabbitMQ", type="fact")
    assert memory.path is not None
    text = memory.path.read_text().replace("RabbitMQ", "Kafka")
    memory.path.write_text(text)  # another program edits the file in place
    assert [h.memory.id for h in md.search("kafka")] == [memory.id]
    assert md.search("rabbitmq") == []


def test_deleted_file_disappears_and_new_file_appears(md: Memdir) -> None:
    memory = md.store("Staging database is read-only on Fridays", type="fact")
    assert memory.path is not None
    memory.path.unlink()
    assert md.search("staging fridays") == []
    new = md.directory("project").path / "reference_oncall.md"
    new.write_text(HAND_WRITTEN)
    hits = md.search("pagerduty rota")
    assert [h.memory.id for h in hits] == ["reference_oncall"]  # no id: the stem is the id
    assert hits[0].memory.name == "Hand written"
    assert "reference_oncall.md" in (new.parent / "MEMORY.md").read_text()
    assert new.read_text() == HAND_WRITTEN  # reading never rewrites a file


def test_renamed_file_keeps_its_id_and_usage(md: Memdir) -> None:
    memory = md.store("Use uv for Python installs", type="preference")
    assert memory.path is not None
    md.search("uv installs")
    renamed = memory.path.with_name("preference_python-tooling.md")
    os.rename(memory.path, renamed)
    got = md.get(memory.id)
    assert got.path == renamed and got.access_count == 2


def test_broken_yaml_is_reported_skipped_and_never_modified(md: Memdir) -> None:
    good = md.store("Docs are built with mkdocs", type="fact")
    broken = md.directory("project").path / "fact_broken.md"
    content = "---\nname: [unclosed\ntype: fact\n---\nbody about mkdocs\n"
    broken.write_text(content)
    stat_before = broken.stat()
    assert [h.memory.id for h in md.search("mkdocs")] == [good.id]
    assert [m.id for m in md.list()] == [good.id]
    assert md.stats().broken_files == 1
    problems = md.doctor()
    assert [p.kind for p in problems] == ["broken-file"]
    assert problems[0].where == str(broken) and "YAML" in problems[0].message
    assert problems[0].hint
    md.reindex()
    assert broken.read_text() == content and broken.stat().st_mtime_ns == stat_before.st_mtime_ns
    # Fixing the file by hand brings it in.
    broken.write_text("---\nname: Fixed\ntype: fact\n---\nbody about mkdocs\n")
    assert {h.memory.id for h in md.search("mkdocs")} == {good.id, "fact_broken"}
    assert md.doctor() == []


def test_other_broken_shapes_never_crash(md: Memdir) -> None:
    folder = md.directory("project").path
    folder.mkdir(parents=True, exist_ok=True)
    samples = {
        "a.md": "no frontmatter at all",
        "b.md": "---\ntype: fact\nno closing line",
        "c.md": "---\n- a list\n- not a mapping\n---\nbody",
        "d.md": "---\nname: x\n---\nmissing type",
        "e.md": "---\ntype: gossip\n---\nunknown type",
        "f.md": "---\ntype: fact\nrelevance: 7\n---\nout of range",
        "g.md": "---\ntype: fact\nreinforced: many\n---\nbad count",
        "h.md": "---\ntype: fact\ncreated: someday\n---\nbad date",
        "j.md": "---\ntype: fact\n2024-01-01: shipped\n---\na date as a key",
        "k.md": "---\ntype: fact\nlog: {2024-01-01: shipped}\n---\na nested date key",
    }
    for name, text in samples.items():
        (folder / name).write_text(text)
    (folder / "i.md").write_bytes(b"---\ntype: fact\n---\n\xff\xfe not utf-8")
    assert md.list() == [] and md.search("body") == []
    kinds = {Path(p.where).name: p for p in md.doctor()}
    assert set(kinds) == {*samples, "i.md"}
    assert "gossip" in kinds["e.md"].message and "fact" in kinds["e.md"].hint


def test_a_file_nested_too_deeply_is_broken_and_every_command_still_works(
        md: Memdir, cli: CLI) -> None:
    # ~1 KB of YAML (it could arrive with a `git pull` into the team folder) once made every
    # command of the home fail with RecursionError.
    good = md.store("Docs are built with mkdocs", type="fact")
    deep = md.directory("project").path / "fact_deep.md"
    deep.write_text("---\ntype: fact\nk: " + "[" * 500 + "]" * 500 + "\n---\nbody about mkdocs\n")
    for command in (["list"], ["search", "mkdocs"], ["context"], ["doctor"], ["stats"]):
        result = cli(*command, "--json")
        assert "internal error" not in result.stderr, (command, result.stderr)
        assert result.returncode in (0, 1), (command, result.stderr)  # doctor: 1, problems
    assert [h.memory.id for h in md.search("mkdocs")] == [good.id]
    problems = md.doctor()
    assert [(Path(p.where).name, p.kind) for p in problems] == [("fact_deep.md", "broken-file")]
    assert "levels deep" in problems[0].message and "flatten" in problems[0].hint


def test_a_file_name_that_is_not_utf8_is_skipped_and_reported(md: Memdir, cli: CLI) -> None:
    # os.listdir gives its bytes as lone surrogates, which SQLite refuses: one such file
    # once made every command (and every hook) fail.
    good = md.store("Docs are built with mkdocs", type="fact")
    folder = md.directory("project").path
    bad = os.path.join(os.fsencode(folder), b"fact_caf\xe9.md")
    with open(bad, "wb") as fh:
        fh.write(b"---\ntype: fact\n---\nbody about mkdocs\n")
    for command in (["list"], ["search", "mkdocs"], ["context"], ["stats"], ["reindex"]):
        result = cli(*command)
        assert result.returncode == 0, (command, result.stderr)
    assert [h.memory.id for h in md.search("mkdocs")] == [good.id]
    md.store("A second note about sphinx", type="fact")  # writes carry on as before
    result = cli("doctor")
    assert result.returncode == 1 and "fact_caf\\xe9.md" in result.stdout
    assert "not valid UTF-8" in result.stdout and "rename" in result.stdout
    assert os.path.exists(bad)  # never modified


def test_reindex_rebuilds_from_files_alone_and_keeps_usage(md: Memdir, home: Path) -> None:
    stored = [md.store(f"Fact number {n} about widgets", type="fact") for n in range(5)]
    md.search("widgets")
    with sqlite3.connect(home / "index.sqlite") as conn:
        conn.execute("DELETE FROM memories")  # the derived part is gone
    seen: list[tuple[int, int]] = []
    assert md.reindex(progress=lambda done, total: seen.append((done, total))) == 5
    assert seen[-1] == (5, 5)
    assert {h.memory.id for h in md.search("widgets")} == {m.id for m in stored}
    assert all(m.access_count == 2 for m in md.list())  # usage survived the rebuild


def test_deleting_the_index_loses_only_usage(md: Memdir, home: Path, repo: Path) -> None:
    memory = md.store("Feature flags live in LaunchDarkly", type="reference")
    md.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(home / "index.sqlite") + suffix).unlink(missing_ok=True)
    with Memdir(home=home, project=repo) as fresh:
        assert [h.memory.id for h in fresh.search("launchdarkly")] == [memory.id]


def test_stray_files_are_ignored(md: Memdir) -> None:
    md.store("Real memory about caching", type="fact")
    folder = md.directory("project").path
    (folder / "notes.txt").write_text("---\ntype: fact\n---\ncaching")
    (folder / ".fact_tmp.md.123.tmp").write_text("partial")
    (folder / "logs").mkdir()
    (folder / "logs" / "2026-11-21.md").write_text("---\ntype: fact\n---\ncaching log")
    assert len(md.search("caching")) == 1
    # Only the temp file left by an interrupted write is worth a mention.
    assert [(p.kind, Path(p.where).name) for p in md.doctor()] == [
        ("temp-file", ".fact_tmp.md.123.tmp")]
