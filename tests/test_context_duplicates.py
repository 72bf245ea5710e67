"""The session-start context says each memory once, in whole words (issue 21, section 3).

The measures (memories said twice, lines with a cut word) are ``bench/context_repeats.py``'s,
the ones ``bench/recall.py`` reports; the tests below also check their results directly.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CLI, cli_json
from memdir import Memdir, Memory, count_tokens
from memdir.retrieval.recall import MAX_MEMORY_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.context_repeats import INDEX_HEADING, Checker

FORMATS = ("markdown", "prompt", "json", "snippets")
ELLIPSIS = "\u2026"

# The README's quickstart, as typed there.
QUICKSTART = (
    ("store", "--type", "preference", "I prefer pnpm over npm or yarn", "--tags", "tools"),
    ("store", "--type", "decision", "Deployments go through ArgoCD, never kubectl apply",
     "--relevance", "high"),
    ("store", "--type", "feedback", "--name", "Testing policy",
     "Integration tests hit a real database, not mocks. **Why:** mocks hid a broken "
     "migration."),
    ("store", "--type", "project", "Merge freeze after Thursday"),
)

# Long words: a cut at a fixed width lands inside one far more often than between two.
WORDS = ("configuration", "deployment", "infrastructure", "observability", "reconciliation",
         "replication", "partitioning", "throughput", "orchestration", "serialization",
         "backpressure", "idempotency", "provisioning", "rollback", "checkpointing",
         "compaction", "sharding", "versioning", "scheduling", "telemetry", "federation",
         "encryption", "throttling", "indexing", "benchmarking", "containerisation",
         "virtualisation", "normalisation", "aggregation", "instrumentation")


def _sentence(n: int, words: int) -> str:
    """``words`` long words, the same for the same ``n``: no text repeats a stretch of itself
    (that would read as a memory said twice)."""
    rng = random.Random(n)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _long_store(md: Memdir) -> None:
    """Memories whose lines must be shortened: texts over the 500-character context line and
    the 160-character snippet, descriptions over MEMORY.md's 150-character entry, names of
    their own and names derived from the text, plus a few short ones."""
    for n in range(6):
        md.store(f"Rule {n}: " + _sentence(n, 60), type="policy" if n % 2 else "fact",
                 relevance=0.9 - n / 20)
    for n in range(6, 10):
        md.store(_sentence(n, 20), type="decision", name=f"Decision {n} on the pipeline",
                 description=_sentence(n + 1, 25), relevance=0.7)
    md.store("Staging is refreshed nightly", type="fact", relevance=0.6)
    md.store("Ana reviews every schema change", type="user", relevance="high")


def _quickstart(md: Memdir) -> None:
    md.store("I prefer pnpm over npm or yarn", type="preference", tags=["tools"])
    md.store("Deployments go through ArgoCD, never kubectl apply", type="decision",
             relevance="high")
    md.store("Integration tests hit a real database, not mocks. **Why:** mocks hid a broken "
             "migration.", type="feedback", name="Testing policy")
    md.store("Merge freeze after Thursday", type="project")


def _index_file_lines(md: Memdir) -> set[str]:
    return set((md.directory("project").path / "MEMORY.md").read_text().splitlines())


def _index_section(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[lines.index(INDEX_HEADING) + 1:] if INDEX_HEADING in lines else []


# -- the quickstart through the real CLI --------------------------------------------------------


def test_quickstart_context_at_300_tokens_says_each_memory_once(cli: CLI, md: Memdir) -> None:
    for command in QUICKSTART:
        cli(*command, check=True)
    out = cli("context", "--budget", "300", check=True).stdout.rstrip("\n")
    memories = md.list()
    # The four memories are listed; MEMORY.md names nothing else, so it adds no section.
    assert out.startswith("4 memories loaded:") and INDEX_HEADING not in out
    found = Checker(memories).check(out, memories, "markdown")
    assert found.repeated == () and found.cut_lines == (), out
    for memory in memories:
        assert out.count(" ".join(memory.body.split())[:30]) == 1, memory.body
    assert count_tokens(out) <= 300
    data = cli_json(cli("context", "--budget", "300", "--json"))
    assert isinstance(data, dict) and data["count"] == 4 and data["index_lines"] == 0
    assert Checker(memories).check(data["text"], memories, "markdown").repeated == ()


# -- every budget, every format ----------------------------------------------------------------


@pytest.mark.parametrize("budget", range(50, 801, 50))
def test_no_memory_twice_and_no_cut_word_at_any_budget(md: Memdir, budget: int) -> None:
    _quickstart(md)
    _long_store(md)
    memories = md.list()
    checker = Checker(memories)
    listed = _index_file_lines(md)
    for fmt in FORMATS:
        for limit in (None, 2):  # with a limit, most of the budget goes to MEMORY.md's lines
            ctx = md.context(budget_tokens=budget, format=fmt, limit=limit)
            assert ctx.tokens == count_tokens(ctx.text) <= budget
            found = checker.check(ctx.text, ctx.memories, fmt)
            assert found.repeated == (), (fmt, limit, ctx.text)
            assert found.cut_lines == (), (fmt, limit, found.cut_lines)
            if fmt == "json":
                index = json.loads(ctx.text)["index"]
                lines = index.split("\n") if index else []
            else:
                lines = _index_section(ctx.text)
                if fmt == "prompt":
                    lines = lines[:-2]  # the closing fence and tag
            hint = [ln for ln in lines if re.fullmatch(r"\[\.\.\. \d+ more lines in MEMORY.md]",
                                                       ln)]
            assert len(lines) - len(hint) == ctx.index_lines
            # Whole lines of MEMORY.md, none naming a memory listed above.
            shown = {m.file for m in ctx.memories}
            for line in lines:
                assert line in listed or line in hint, line
                assert not set(re.findall(r"\]\(([^)]+)\)", line)) & shown, line


def test_context_lines_are_cut_between_words() -> None:
    """One context line of a long memory (500 characters), one snippet (160), one MEMORY.md
    entry (150): each ends with a whole word, then '…'."""
    from memdir.core.listing import index_line
    from memdir.core.shorten import shorten

    text = "Rule 1: " + _sentence(1, 60)
    words = set(text.split())
    md_line = index_line("Decision", "decision_x.md", "decision", text)
    for line in (shorten(text, 500), shorten(text, 160), md_line):
        assert line.endswith(ELLIPSIS) and line.rsplit(" ", 1)[-1][:-1] in words, line
    assert len(md_line) <= 150 and md_line.startswith("- [Decision](decision_x.md) (decision) — ")


# -- MEMORY.md entries --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "description", "expected"), [
    # A name derived from the text: the text once, as the link's text.
    ("I prefer pnpm over npm or yarn", "I prefer pnpm over npm or yarn",
     "- [I prefer pnpm over npm or yarn](p.md) (preference)"),
    ("Deployments go through…", "Deployments go through ArgoCD, never kubectl apply",
     "- [Deployments go through ArgoCD, never kubectl apply](p.md) (preference)"),
    # A name of its own, then the description.
    ("Testing policy", "Integration tests hit a real database",
     "- [Testing policy](p.md) (preference) — Integration tests hit a real database"),
    ("Linter", "", "- [Linter](p.md) (preference)"),
    ("Odd [name]", "Something else", "- [Odd (name)](p.md) (preference) — Something else"),
])
def test_index_entries_say_the_text_once(name: str, description: str, expected: str) -> None:
    from memdir.core.listing import index_line

    assert index_line(name, "p.md", "preference", description) == expected


def test_a_long_index_entry_ends_with_a_whole_word(md: Memdir) -> None:
    text = "Deployments go through ArgoCD, never kubectl apply; " + _sentence(3, 30)
    md.store(text, type="decision")
    entry = next(ln for ln in _index_file_lines(md) if ln.startswith("- ["))
    label = entry[3:entry.index("](")]
    assert len(entry) <= 150 and label.endswith(ELLIPSIS)
    last = re.findall(r"\w+", label)[-1]
    assert last in re.findall(r"\w+", text)  # "…" after a whole word


def test_old_index_lines_are_recomputed_and_memory_md_rewritten(home: Path, repo: Path) -> None:
    """An index written before entries were cut between words is migrated: its lines are
    computed again and the next command rewrites MEMORY.md with them."""
    from memdir.core.index_schema import MIGRATIONS
    from memdir.core.listing import index_line

    text = "Deployments go through ArgoCD, never kubectl apply; " + _sentence(3, 30)
    with Memdir(home=home, project=repo, sync_interval=0) as md:
        memory = md.store(text, type="decision")
        folder = md.directory("project").path
    old = "- [" + memory.name + f"]({memory.file}) (decision) — Deployments go thr…"
    conn = sqlite3.connect(home / "index.sqlite", isolation_level=None)
    conn.execute("UPDATE memories SET index_line = ?", (old,))
    version = 1 + next(n for n, (name, _) in enumerate(MIGRATIONS)
                       if name.startswith("MEMORY.md entries cut between words"))
    conn.execute("DELETE FROM schema_migrations WHERE version = ?", (version,))
    conn.close()
    index = folder / "MEMORY.md"
    index.write_text(index.read_text().replace(index_line(memory.name, memory.file or "",
                                                          "decision", memory.description), old))
    assert "thr…" in index.read_text()
    with Memdir(home=home, project=repo, sync_interval=0) as md:
        md.context()
        assert "thr…" not in index.read_text()
        assert md.index.conn.execute("SELECT index_line FROM memories").fetchone()[0] \
            == index_line(memory.name, memory.file or "", "decision", memory.description)
        assert md.get(memory.id).body == text  # the file is only read, never changed


# -- a MEMORY.md edited by hand ---------------------------------------------------------------


def _hand_index(md: Memdir, lines: list[str]) -> Path:
    path = md.directory("project").path / "MEMORY.md"
    path.write_text("# Project notes\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_hand_edited_index_lines_about_listed_memories_are_dropped(md: Memdir) -> None:
    _quickstart(md)
    files = {m.name: m.file for m in md.list()}
    testing, pnpm = files["Testing policy"], files["I prefer pnpm over npm or yarn"]
    deploy = next(f for n, f in files.items() if n.startswith("Deployments"))
    duplicates = [
        f"- [Testing]({testing}) — real database in tests",
        f"- See [deploys](./{deploy}#why) and [tests](<{testing}>) before releasing",
        "- I prefer pnpm over npm or yarn.",
        "* **Testing policy**",
    ]
    extras = [
        "- [Runbook](https://wiki.example.com/runbook) — the on-call runbook",
        "- [Old notes](notes/old.md) — kept by hand",
        f"- [Both]({pnpm}) and [gone](fact_gone.md): the second is no memory shown",
        "- Ask Ana before touching billing",
    ]
    _hand_index(md, [*duplicates, *extras])
    for fmt in ("markdown", "prompt", "json"):
        ctx = md.context(budget_tokens=2000, format=fmt)
        assert len(ctx.items) == 4 and ctx.index_lines == 5  # the title and the extras
        index = json.loads(ctx.text)["index"] if fmt == "json" else ctx.text
        for line in extras:
            assert line in index.split("\n"), (fmt, line)  # whole
        for line in duplicates:
            assert line not in index, (fmt, line)
        assert "Project notes" in index
    # A line about a memory that is not listed stays.
    one = md.context(budget_tokens=2000, limit=1)
    assert one.memories[0].file != pnpm
    assert any(f"]({pnpm})" in line for line in _index_section(one.text))


def test_an_index_line_that_does_not_fit_is_left_out_whole(md: Memdir) -> None:
    md.store("Never force-push to main", type="policy")
    long = "- " + _sentence(5, 60)  # ~200 tokens
    short = ["- Ask Ana before touching billing", "- Release notes live in docs/releases"]
    _hand_index(md, [short[0], long, *short[1:]])
    full = md.context(budget_tokens=2000)
    assert full.index_lines == 4 and long in full.text
    ctx = md.context(budget_tokens=120)
    assert ctx.tokens <= 120 and ctx.index_lines == 3
    section = _index_section(ctx.text)
    # The title stays too (escaped: a line of MEMORY.md cannot start a section).
    assert section == ["\\# Project notes", *short, "[... 1 more lines in MEMORY.md]"]


# -- the same text in two scopes ----------------------------------------------------------------


def test_the_same_text_in_two_scopes_is_listed_once(md: Memdir) -> None:
    md.store("Use UTC in every log line", type="policy", scope="project")
    md.store("Use UTC in every log line", type="policy", scope="user")
    ctx = md.context(budget_tokens=800)
    assert ctx.text.count("Use UTC in every log line") == 1 and len(ctx.items) == 1


# -- recall's 4 KB cut ----------------------------------------------------------------------------


def test_recall_cuts_a_long_memory_between_words(md: Memdir) -> None:
    body = "Observability notes: " + " ".join(_sentence(n, 40) for n in range(20))
    assert len(body.encode()) > MAX_MEMORY_BYTES
    md.store(body, type="fact")
    recalled = md.recall("observability notes partitioning", "s1").items[0]
    assert recalled.truncated and len(recalled.content.encode()) <= MAX_MEMORY_BYTES
    kept, _, note = recalled.content.partition("\n\n[... truncated")
    assert note and body.startswith(kept)
    assert kept.rsplit(" ", 1)[-1] in WORDS  # a whole word before the note


# -- shortening -------------------------------------------------------------------------------

TEXT = st.text(alphabet=st.sampled_from(list("abcdefgh  ,.;:-/_'é日")), max_size=300)


@given(text=TEXT, limit=st.integers(min_value=1, max_value=200))
def test_shorten_fits_and_keeps_whole_words(text: str, limit: int) -> None:
    from memdir.core.shorten import shorten

    out = shorten(text, limit)
    assert len(out) <= limit
    if len(text) <= limit:
        assert out == text
        return
    assert out.endswith(ELLIPSIS) and text.startswith(out[:-1])
    head = out[:-1]
    room = limit - 1
    # Between words, unless the last half of the room holds no space or punctuation at all.
    inside = head and head[-1].isalnum() and text[len(head)].isalnum()
    breaks = [c for c in text[room // 2:room] if not (c.isalnum() or c in "_'")]
    assert not inside or not breaks, (text, limit, out)


@given(text=TEXT, limit=st.integers(min_value=20, max_value=400))
def test_shorten_bytes_fits_in_bytes(text: str, limit: int) -> None:
    from memdir.core.shorten import shorten_bytes

    out = shorten_bytes(text, limit, " [cut]")
    assert len(out.encode()) <= limit
    assert out == text or (out.endswith(" [cut]") and text.startswith(out[:-6]))


def test_checker_sees_what_main_did(md: Memdir) -> None:
    """The measures themselves: a context as main rendered it for the quickstart (its index
    repeating the memories, one entry cut inside a word) is caught twice over."""
    _quickstart(md)
    memories: list[Memory] = md.list()
    deploy = next(m for m in memories if m.body.startswith("Deployments"))
    text = "\n".join(["1 memory loaded:", "### [D] Decisions", f"- {deploy.body}", INDEX_HEADING,
                      f"- [{deploy.name}]({deploy.file}) (decision) — Deployments go thr…"])
    found = Checker(memories).check(text, [deploy], "markdown")
    assert found.repeated == (deploy.id,) and len(found.cut_lines) == 1
    assert found.index_tokens == count_tokens("\n".join(text.split("\n")[3:]))
