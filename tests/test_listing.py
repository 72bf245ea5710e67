"""MEMORY.md and its overflow pages after single writes (memdir.core.listing): a write rewrites only
the pages it affects, and what it leaves is byte for byte what regenerating everything from the
rows writes, after any sequence of stores, duplicates, updates, reclassifications, archives,
restores and deletions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir import Memdir
from memdir.core import listing

TYPES = ["fact", "decision", "pitfall", "reference"]


def _snapshot(folder: Path) -> dict[str, str]:
    files = {"MEMORY.md": (folder / "MEMORY.md").read_text()}
    if (folder / "index").is_dir():
        files.update({f"index/{p.name}": p.read_text() for p in (folder / "index").iterdir()})
    return files


def _regenerated(md: Memdir) -> dict[str, str]:
    """What regenerating everything from the rows writes."""
    mdir = md.directory("project")
    with md.index.write() as conn:
        listing.regenerate_index(conn, mdir)
    return _snapshot(mdir.path)


operations = st.lists(st.tuples(
    st.sampled_from(["store", "again", "relevance", "reclassify", "archive", "restore",
                     "delete"]),
    st.integers(0, 10_000), st.sampled_from(TYPES), st.sampled_from([0.1, 0.5, 0.8, 1.0])),
    min_size=1, max_size=12)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, start=st.integers(8, 30))
def test_single_writes_leave_what_a_full_regeneration_writes(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        ops: list[tuple[str, int, str, float]], start: int) -> None:
    # Small caps, so that a few dozen memories overflow, pages are cut, and a write moves
    # lines between MEMORY.md and the pages.
    monkeypatch.setattr(listing, "INDEX_KEEP", 12)
    monkeypatch.setattr(listing, "INDEX_HEAD", 8)
    monkeypatch.setattr(listing, "OVERFLOW_LINES", 3)
    root = tmp_path_factory.mktemp("listing")
    (root / "project").mkdir()
    with Memdir(home=root / "home", project=root / "project", semantic=False,
                sync_interval=0) as md:
        md.store_many([{"content": f"memory {n} about part {n}", "type": TYPES[n % 4],
                        "relevance": [0.2, 0.5, 0.9][n % 3]} for n in range(start)])
        folder = md.directory("project").path
        for n, (op, pick, kind, relevance) in enumerate(ops):
            everything = md.list(status="all", limit=10_000)
            target = everything[pick % len(everything)] if everything else None
            if op == "store" or target is None:
                md.store(f"new memory {n} on topic {pick}", type=kind, relevance=relevance)
            elif op == "again":
                md.store(target.body, type=target.type)  # a duplicate: reinforced
            elif op == "relevance":
                md.update(target.id, relevance=relevance)
            elif op == "reclassify":
                md.reclassify(target.id, kind)
            elif op == "archive":
                md.archive(target.id)
            elif op == "restore":
                md.restore(target.id)
            else:
                md.delete(target.id)
            written = _snapshot(folder)
            assert written == _regenerated(md), (n, op)


def test_a_store_rewrites_only_its_types_page_and_restores_a_missing_one(md: Memdir) -> None:
    md.store_many([{"content": f"fact {n} about subsystem {n}", "type": "fact"}
                   for n in range(200)]
                  + [{"content": f"pitfall {n} in module {n}", "type": "pitfall",
                      "relevance": 0.3} for n in range(30)]
                  + [{"content": f"decision {n} on design {n}", "type": "decision",
                      "relevance": 0.2} for n in range(20)])
    pages = md.directory("project").path / "index"
    (pages / "pitfall.md").unlink()  # removed by hand
    fact_page = (pages / "fact.md").read_text()
    (pages / "fact.md").write_text(fact_page + "edited by hand\n")  # memdir's page, edited
    before = {p.name: p.stat().st_ino for p in pages.iterdir()}
    md.store("decision 99 on the new design", type="decision", relevance=0.2)
    after = {p.name: p.stat().st_ino for p in pages.iterdir()}
    assert after["decision.md"] != before["decision.md"]  # its type: rewritten
    assert "pitfall.md" in after  # missing: written again
    # Untouched, so not rewritten; a full regeneration (reconcile, reindex) repairs it.
    assert (pages / "fact.md").read_text() == fact_page + "edited by hand\n"
    md.reindex()
    assert (pages / "fact.md").read_text() == fact_page


def test_memdir_knows_the_memory_md_it_wrote_until_someone_edits_it(md: Memdir) -> None:
    """Injection skips the secret check only for the MEMORY.md memdir wrote, unedited."""
    from memdir.core.files import read_index_stat

    md.store("Deployments go through ArgoCD", type="decision")
    mdir = md.directory("project")

    def ours() -> bool:
        return listing.written_by_memdir(md.index.conn, mdir.key, read_index_stat(mdir.path)[1])

    assert ours()
    index = mdir.path / "MEMORY.md"
    index.write_text(index.read_text() + "- a line typed by hand\n")
    assert not ours()
    md.store("Staging is read-only on Fridays", type="fact")  # regenerated: ours again
    assert ours()
    index.unlink()
    assert not ours()
