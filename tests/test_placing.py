"""Placing new memories: a batch of ``placing.BULK`` or more (lookups per batch, no reconcile
first) gives the same files, ids and reinforcements as single stores, never overwrites a
file the index does not know, never hides a change made outside memdir, and takes every file
back when a write fails."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from memdir import Memdir
from memdir.core import placing
from memdir.core.markdown import parse
from memdir.core.new_files import NewFiles


def _items(n: int) -> list[dict[str, Any]]:
    # Seven shared names (collisions inside the batch), and every fifth body a duplicate of
    # the one five before it (reinforcements inside the batch).
    return [{"content": f"Batch note {n - n % 5 if n % 5 == 4 else n} about the queue",
             "type": "fact", "name": f"shared {n % 7}", "tags": [f"t{n % 3}"]}
            for n in range(n)]


def _files(md: Memdir) -> dict[str, tuple[str, int]]:
    """file name -> (body, reinforced), read back from the disk."""
    folder = md.directory("project").path
    out = {}
    for path in folder.glob("*.md"):
        if path.name != "MEMORY.md":
            memory = parse(path.read_text(encoding="utf-8"), stem=path.stem)
            out[path.name] = (memory.body, memory.reinforced)
    return out


def test_a_batch_places_memories_as_single_stores_do(tmp_path: Path, repo: Path) -> None:
    items = _items(3 * placing.BULK)
    with Memdir(home=tmp_path / "one", project=repo, sync_interval=0) as one:
        one.store("Batch note 0 about the queue", type="fact", name="shared 0")
        for item in items:
            fields = dict(item)
            one.store(fields.pop("content"), **fields)
        singles = _files(one)
    with Memdir(home=tmp_path / "many", project=repo, sync_interval=0) as many:
        many.store("Batch note 0 about the queue", type="fact", name="shared 0")
        stored = many.store_many(items)
        batch = _files(many)
        assert batch == singles
        assert len(stored) == len(items)
        # Every duplicate returns the one memory it reinforced, with the final count.
        assert stored[0].id == stored[4].id and stored[0].reinforced == 2
        assert stored[5].id == stored[9].id and stored[5].reinforced == 1
        assert len({m.id for m in stored}) == len(singles)  # item 0 reinforced the first store
        assert many.stats().total == len(singles)
        for memory in stored[::7]:
            assert many.get(memory.id).path == memory.path


def test_a_batch_never_overwrites_a_file_the_index_does_not_know(md: Memdir) -> None:
    folder = md.directory("project").path
    folder.mkdir(parents=True, exist_ok=True)
    broken = folder / "fact_shared-0.md"
    broken.write_text("---\nid: [unclosed\n---\nhand-written notes\n", encoding="utf-8")
    before = broken.read_bytes()
    stored = md.store_many(_items(placing.BULK + 3))
    assert broken.read_bytes() == before
    names = {m.path.name for m in stored if m.path is not None}
    assert "fact_shared-0.md" not in names and "fact_shared-0-2.md" in names
    assert [p.kind for p in md.doctor() if p.where == str(broken)] == ["broken-file"]


def test_a_batch_gives_ids_already_in_the_directory_fresh_ones(md: Memdir) -> None:
    kept = md.store_many([{"content": f"Existing note {n}", "type": "fact"}
                          for n in range(placing.BULK)])
    # An import can bring memories whose ids this directory already holds.
    again = [m.replace(body=f"Imported note {n}", path=None) for n, m in enumerate(kept)]
    placed = placing.write_new(md.index, md.directory("project"), again)
    assert not {m.id for m in placed} & {m.id for m in kept}
    assert len({m.id for m in placed}) == len(placed)
    assert md.stats().total == 2 * placing.BULK
    assert md.get(kept[3].id).body == "Existing note 3"


@pytest.mark.parametrize("count", [1, placing.BULK])
def test_a_drawn_id_the_directory_holds_is_drawn_again(md: Memdir, count: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Ids are 40 random bits: in a large store a draw can hit an existing id. Both the single
    # path (one query per id) and a batch (ids drawn up front, one query) must draw again.
    taken = md.store("Existing note", type="fact")
    real = placing.new_id
    draws = iter([taken.id, taken.id])
    monkeypatch.setattr(placing, "new_id", lambda: next(draws, None) or real())
    placed = md.store_many([{"content": f"New note {n}", "type": "fact"} for n in range(count)])
    ids = [m.id for m in placed]
    assert taken.id not in ids
    assert len(set(ids)) == count
    assert md.get(taken.id).body == "Existing note"
    assert md.stats().total == count + 1


def test_a_failed_write_takes_back_the_whole_batch(md: Memdir,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first = md.store("Written before the batch", type="fact")
    folder = md.directory("project").path
    index_before = (folder / "MEMORY.md").read_bytes()
    real = NewFiles.create
    calls = []

    def disk_fills_up(self: NewFiles, name: str, data: bytes, **kw: Any) -> os.stat_result:
        calls.append(name)
        if len(calls) == placing.BULK:  # fault injection: the disk fills up mid-batch
            raise OSError(errno.ENOSPC, "No space left on device", name)
        return real(self, name, data, **kw)

    monkeypatch.setattr(NewFiles, "create", disk_fills_up)
    with pytest.raises(OSError, match="No space left"):
        md.store_many([{"content": f"Doomed note {n}", "type": "fact"}
                       for n in range(2 * placing.BULK)])
    assert len(calls) >= placing.BULK
    monkeypatch.undo()
    left = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert left == ["MEMORY.md", first.path.name if first.path else ""]
    assert (folder / "MEMORY.md").read_bytes() == index_before
    assert [m.id for m in md.list()] == [first.id]
    assert md.search("Doomed note") == []


def test_changes_made_outside_memdir_before_a_batch_are_seen_after_it(md: Memdir) -> None:
    # A batch skips the reconcile before writing; its fingerprint carried forward must not
    # absorb an edit in place, a new file or a deleted one made just before it.
    kept, edited, gone = (md.store(f"Old words kiwi{n} about the pager", type="fact",
                                   name=f"n{n}")
                          for n in range(3))
    assert edited.path is not None and gone.path is not None
    md.search("pager")  # the index and its fingerprint are current
    text = edited.path.read_text(encoding="utf-8").replace("kiwi1", "zebra")
    edited.path.write_text(text, encoding="utf-8")  # in place: the directory mtime stays
    gone.path.unlink()
    folder = md.directory("project").path
    (folder / "fact_by-hand.md").write_text("---\ntype: fact\n---\nHand written giraffe\n")
    md.store_many([{"content": f"Batch note {n}", "type": "fact"}
                   for n in range(placing.BULK)])
    later = Memdir(home=md.home, project=md.roots.worktree)
    assert [h.memory.id for h in later.search("zebra")] == [edited.id]
    assert later.search("kiwi1") == []
    assert [h.memory.file for h in later.search("giraffe")] == ["fact_by-hand.md"]
    assert gone.id not in {m.id for m in later.list()}
    assert later.stats().total == 3 + placing.BULK
    assert kept.id in {m.id for m in later.list()}
