"""Memory files and MEMORY.md: format details, atomic writes, the index caps and their hints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir import Memdir, MemoryFileError
from memdir.core.files import MAX_INDEX_BYTES, atomic_write, read_index, slugify
from memdir.core.markdown import parse, render

CLAUDE_STYLE = """---
name: Don't summarize at the end of responses
description: User explicitly asked to skip summary paragraphs
type: feedback
---
User said "don't summarize" because they can review diffs themselves.

**Why:** summaries waste time.
**How to apply:** end immediately after completing a task.
"""


def test_claude_code_style_file_parses_with_defaults() -> None:
    memory = parse(CLAUDE_STYLE, stem="feedback_no_summary")
    assert memory.id == "feedback_no_summary" and memory.type == "feedback"
    assert memory.description == "User explicitly asked to skip summary paragraphs"
    assert memory.body.startswith('User said "don\'t summarize"')
    assert memory.relevance == 0.9 and memory.status == "active" and memory.tags == ()


def test_unknown_keys_survive_a_rewrite(md: Memdir) -> None:
    memory = md.store("Weekly sync is on Zoom", type="fact")
    assert memory.path is not None
    text = memory.path.read_text().replace("status: active\n",
                                           "status: active\nowner: ana\nlinks: [a, b]\n")
    memory.path.write_text(text)
    updated = md.update(memory.id, tags=["meetings"])
    assert updated.meta == {"owner": "ana", "links": ["a", "b"]}
    assert "owner: ana" in memory.path.read_text()


def test_render_quotes_what_yaml_would_misread() -> None:
    memory = parse(CLAUDE_STYLE, stem="x").replace(
        name="yes", description="key: value # not a comment", tags=("null", "1.5", "ok"))
    again = parse(render(memory), stem="x")
    assert again.name == "yes" and again.description == "key: value # not a comment"
    assert again.tags == ("null", "1.5", "ok")


def test_body_with_frontmatter_markers_round_trips() -> None:
    memory = parse(CLAUDE_STYLE, stem="x").replace(body="first\n---\nsecond\n---\nthird")
    assert parse(render(memory), stem="x").body == "first\n---\nsecond\n---\nthird"


@pytest.mark.parametrize("text", ["", "body only", "---\ntype: fact\n", "---\n: :\n---\n"])
def test_malformed_files_raise_a_file_error_with_a_hint(text: str) -> None:
    with pytest.raises(MemoryFileError) as info:
        parse(text, stem="x")
    assert info.value.hint


def test_crlf_and_bom_are_accepted() -> None:
    text = "\ufeff" + CLAUDE_STYLE.replace("\n", "\r\n")
    assert parse(text, stem="x").type == "feedback"


def test_atomic_write_never_leaves_a_partial_file(tmp_path: Path) -> None:
    folder = tmp_path / "memories"
    folder.mkdir()
    target = folder / "fact_x.md"
    target.write_text("old complete content")

    class BoomError(Exception):
        pass

    class Exploding(str):
        def encode(self, *args: object, **kwargs: object) -> bytes:  # type: ignore[override]
            raise BoomError

    with pytest.raises(BoomError):
        atomic_write(target, Exploding("new"))
    assert target.read_text() == "old complete content"
    assert [p.name for p in folder.iterdir()] == ["fact_x.md"]  # no temp file left behind


def test_slugs() -> None:
    assert slugify("Testing policy!") == "testing-policy"
    assert slugify("Café déjà vu") == "cafe-deja-vu"
    assert slugify("../../etc/passwd") == "etc-passwd"
    assert slugify("日本語") == "memory"
    assert len(slugify("x" * 500)) <= 60
    # A long name is cut between words, never inside one.
    long = "Check the status page before deploys and deploy tomorrow morning"
    assert slugify(long) == "check-the-status-page-before-deploys-and-deploy-tomorrow"


def test_index_lines_are_short_and_well_formed(md: Memdir) -> None:
    md.store("word " * 200, type="fact", name="Very long one", description="d" * 400)
    lines = (md.directory("project").path / "MEMORY.md").read_text().splitlines()
    entries = [ln for ln in lines if ln.startswith("- [")]
    assert len(entries) == 1 and len(entries[0]) <= 150 and entries[0].endswith("…")


def test_index_is_capped_at_200_lines_with_a_hint(md: Memdir) -> None:
    # A long MEMORY.md that memdir did not write (hand-made, or adopted) is cut on read.
    folder = md.directory("project").path
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "MEMORY.md").write_text("\n".join(f"- note {n}" for n in range(260)) + "\n")
    text = md.memory_index()
    body, _, hint = text.partition("[... truncated")
    assert len(body.rstrip("\n").split("\n")) == 200
    assert "200-line cap" in hint and "consolidate" in hint
    kinds = [p.kind for p in md.doctor()]
    assert "index-too-long" in kinds and set(kinds) <= {"index-too-long", "index-too-large"}


@pytest.mark.parametrize("cap", [10, 30])  # 205 memories: a query per type; one pass
def test_overflow_pages_list_the_most_relevant_and_say_how_to_find_the_rest(
        md: Memdir, monkeypatch: pytest.MonkeyPatch, cap: int) -> None:
    import memdir.core.listing

    monkeypatch.setattr(memdir.core.listing, "OVERFLOW_LINES", cap)
    md.store_many([{"content": f"fact {n} about subsystem {n}", "type": "fact",
                    "name": f"fact {n:03d}", "relevance": 0.9 - n / 1000} for n in range(200)]
                  + [{"content": f"decision {n} on design {n}", "type": "decision",
                      "relevance": 0.1} for n in range(5)])
    folder = md.directory("project").path
    lines = (folder / "MEMORY.md").read_text().splitlines()
    assert "## More (55 memories not listed above)" in lines
    assert "- [50 more fact memories](index/fact.md)" in lines
    assert "- [5 more decision memories](index/decision.md)" in lines
    page = (folder / "index" / "fact.md").read_text()
    # The facts right after the 150 in MEMORY.md, most relevant first ...
    assert re.findall(r"\]\(\.\./(fact_[\w-]+)\.md\)", page) == [
        f"fact_fact-{n:03d}" for n in range(150, 150 + cap)]
    # ... and where the others are.
    assert f"{50 - cap} less relevant fact memories are not listed" in page
    assert "memdir search QUERY --type fact" in page
    decisions = (folder / "index" / "decision.md").read_text()
    assert decisions.count("](../decision_") == 5 and "not listed" not in decisions


def test_a_write_rewrites_only_the_overflow_pages_it_changes(md: Memdir) -> None:
    md.store_many([{"content": f"fact {n} about subsystem {n}", "type": "fact"}
                   for n in range(200)]
                  + [{"content": f"decision {n} on design {n}", "type": "decision",
                      "relevance": 0.2} for n in range(20)])
    pages = md.directory("project").path / "index"
    before = {p.name: (p.stat().st_ino, p.read_text()) for p in pages.iterdir()}
    md.store("decision 99 on the new design", type="decision", relevance=0.2)
    after = {p.name: (p.stat().st_ino, p.read_text()) for p in pages.iterdir()}
    assert after["fact.md"] == before["fact.md"]  # the same file, not a rewrite of it
    assert after["decision.md"][0] != before["decision.md"][0]
    assert "decision 99" in after["decision.md"][1] or "decision-99" in after["decision.md"][1]
    assert after["decision.md"][1].count("](../decision_") == 21


def test_memdir_keeps_its_index_under_the_cap(md: Memdir) -> None:
    stored = md.store_many([{"content": f"fact {n} about subsystem {n}", "type": "fact"}
                            for n in range(230)]
                           + [{"content": f"decision {n} on design {n}", "type": "decision",
                               "relevance": 0.2} for n in range(20)])
    folder = md.directory("project").path
    lines = (folder / "MEMORY.md").read_text().splitlines()
    assert len(lines) < 200 and "[... truncated" not in md.memory_index()
    assert "## More (100 memories not listed above)" in lines
    assert "- [80 more fact memories](index/fact.md)" in lines
    assert "- [20 more decision memories](index/decision.md)" in lines
    overflow = (folder / "index" / "decision.md").read_text()
    assert overflow.count("](../decision_") == 20
    assert "index-too-long" not in [p.kind for p in md.doctor()]
    assert md.reconcile() is False  # the overflow folder is not mistaken for memories
    for memory in stored[100:]:
        md.archive(memory.id)
    assert not (folder / "index").exists() or not list((folder / "index").glob("*.md"))
    assert "## More" not in (folder / "MEMORY.md").read_text()


def test_index_is_capped_at_25000_bytes_with_a_hint(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("\n".join("- " + "x" * 1000 for _ in range(100)))
    text = read_index(tmp_path)
    head, _, hint = text.partition("\n\n[... truncated")
    assert len(head.encode()) <= MAX_INDEX_BYTES
    assert "25000-byte cap" in hint and "one line" in hint


def test_hand_written_index_is_kept_once_as_orig(md: Memdir) -> None:
    folder = md.directory("project").path
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text("# My notes\n- [x](x.md) — hand made\n")
    md.store("Something new", type="fact")
    assert (folder / "MEMORY.md.orig").read_text() == "# My notes\n- [x](x.md) — hand made\n"
    md.store("Something else", type="fact")
    assert "hand made" in (folder / "MEMORY.md.orig").read_text()


@given(st.lists(st.one_of(st.text(max_size=30), st.integers(0, 10**6),
                          st.floats(0, 1, allow_nan=False),
                          st.lists(st.text(max_size=10), max_size=4)), max_size=6),
       st.lists(st.sampled_from(["yes", "No", "null", "~", "07", "1e5", "2026-01-01", "a # b",
                                 "x: y", "[a, [b]]", "", " lead", "tail ", "-1", ".5"]),
                max_size=3))
def test_fast_frontmatter_reader_agrees_with_yaml(values: list[object], odd: list[str]) -> None:
    """Whatever the fast reader accepts, it reads exactly as PyYAML does."""
    import yaml

    from memdir.core.markdown import _flow, _NotSimpleError, _scalar, _simple_frontmatter

    lines = [f"k{n}: {_flow(tuple(v)) if isinstance(v, list) else _scalar(v)}"
             for n, v in enumerate(values)]
    lines += [f"o{n}: {text}" for n, text in enumerate(odd)]
    front = "\n".join(lines) + "\n"
    try:
        fast = _simple_frontmatter(front)
    except _NotSimpleError:
        return
    assert fast == (yaml.safe_load(front) or {})


def test_regenerating_a_large_index_reads_only_the_listing_index(md: Memdir) -> None:
    # Past INDEX_KEEP memories, every store regenerates MEMORY.md and its overflow pages from
    # all lines and their types: that must come from the index, never from the wide rows.
    from memdir.core.files import INDEX_KEEP

    md.store_many([{"content": f"fact {n} about subsystem {n}", "type": "fact"}
                   for n in range(INDEX_KEEP + 20)])
    conn = md.index.conn
    seen: list[str] = []
    conn.set_trace_callback(lambda sql: seen.append(sql) if "index_line" in sql else None)
    try:
        md.store("one more fact about the cache", type="fact")
    finally:
        conn.set_trace_callback(None)
    reads = [sql for sql in seen if sql.lstrip().upper().startswith("SELECT")]
    assert reads, "MEMORY.md was not regenerated"
    for sql in reads:
        plan = " | ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "COVERING INDEX memories_listing" in plan, (sql, plan)
