"""Directory fingerprints carried over memdir's own writes: the next command does not compare
every row with the files memdir just wrote itself, and never misses what another program did
to the directory while memdir was writing."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

import memdir.placing
from memdir import Memdir
from memdir import fingerprint as fp

OTHER = """---
name: Written elsewhere
type: fact
---
The build cache lives on the shared NFS volume.
"""


def _saved(md: Memdir) -> tuple[str, int | None]:
    row = md.index.conn.execute("SELECT fingerprint, names FROM dir_state WHERE dir = ?",
                                (md.directory("project").key,)).fetchone()
    assert row is not None
    return str(row[0]), row[1]


def _batch(n: int, word: str) -> list[dict[str, object]]:
    return [{"content": f"{word} note number {i} about the deploy runbook", "type": "fact"}
            for i in range(n)]


@pytest.mark.parametrize("size", [1, 5, 40])
def test_own_writes_carry_the_fingerprint(md: Memdir, size: int) -> None:
    md.store("The first memory, so the directory has a fingerprint", type="fact")
    md.reconcile()
    md.store_many(_batch(size, "alpha"))
    path = md.directory("project").path
    fingerprint, disk = fp.scan(path)
    # What is saved is exactly what a fresh listing of the directory gives ...
    assert _saved(md) == (fingerprint, fp.names_sum(disk))
    assert len(disk) == size + 1
    # ... so the next command has nothing to compare, and finds everything.
    assert md.reconcile() is False
    assert len(md.search("alpha runbook", limit=100)) == size


def test_a_reinforced_duplicate_carries_the_fingerprint(md: Memdir) -> None:
    first = md.store("Releases go out on Tuesdays", type="decision")
    md.reconcile()
    again = md.store_many([{"content": "releases go out on   TUESDAYS", "type": "decision"},
                           *_batch(40, "beta")])
    assert again[0].id == first.id and again[0].reinforced == 1
    fingerprint, disk = fp.scan(md.directory("project").path)
    assert _saved(md) == (fingerprint, fp.names_sum(disk))


def _rename(path: Path) -> None:
    victim = path / "fact_victim.md"
    os.rename(victim, path / "fact_renamed-by-hand.md")


def _edit(path: Path) -> None:
    victim = path / "fact_victim.md"
    victim.write_text(victim.read_text().replace("zeppelin", "dirigible"))


def _add(path: Path) -> None:
    (path / "fact_added-by-hand.md").write_text(OTHER)


def _delete(path: Path) -> None:
    (path / "fact_victim.md").unlink()


@pytest.mark.parametrize("change", [_rename, _edit, _add, _delete])
@pytest.mark.parametrize("size", [1, 40])
def test_changes_by_another_program_during_a_write_are_not_absorbed(
        md: Memdir, home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch,
        change: Callable[[Path], None], size: int) -> None:
    victim = md.store("The zeppelin hangar key is in the office safe", type="fact",
                      name="victim")
    assert victim.path is not None and victim.path.name == "fact_victim.md"
    md.reconcile()
    real = memdir.placing.regenerate_index

    def meanwhile(conn: object, mdir: memdir.store.MemoryDir) -> None:
        # Another program acts while memdir holds the write lock, its files written.
        change(mdir.path)
        real(conn, mdir)  # type: ignore[arg-type]

    monkeypatch.setattr(memdir.placing, "regenerate_index", meanwhile)
    md.store_many(_batch(size, "gamma"))
    monkeypatch.undo()
    with Memdir(home=home, project=repo) as fresh:  # the next command
        files = {m.path.name for m in fresh.list() if m.path is not None}
        assert len(fresh.search("gamma runbook", limit=100)) == size
        if change is _rename:
            assert "fact_renamed-by-hand.md" in files and "fact_victim.md" not in files
            assert fresh.get(victim.id).path == victim.path.with_name("fact_renamed-by-hand.md")
        elif change is _edit:
            assert [h.memory.id for h in fresh.search("dirigible")] == [victim.id]
            assert fresh.search("zeppelin") == []
        elif change is _add:
            assert [h.memory.name for h in fresh.search("nfs volume")] == ["Written elsewhere"]
        else:
            assert "fact_victim.md" not in files and fresh.search("zeppelin") == []


def test_an_index_without_a_names_checksum_carries_nothing(md: Memdir) -> None:
    md.store("Something to fingerprint", type="fact")
    md.reconcile()
    key = md.directory("project").key
    with md.index.write() as conn:  # as an index saved before the checksum existed
        conn.execute("UPDATE dir_state SET names = NULL WHERE dir = ?", (key,))
    before = _saved(md)
    md.store_many(_batch(3, "delta"))
    assert _saved(md) == before  # not carried: the next reconcile compares the rows
    assert md.reconcile() is False  # ... finds them all matching, and saves a fresh one
    fingerprint, disk = fp.scan(md.directory("project").path)
    assert _saved(md) == (fingerprint, fp.names_sum(disk))


def test_reconcile_carries_the_fingerprint_over_its_own_index_rewrite(md: Memdir) -> None:
    memory = md.store("The VPN gateway is in Frankfurt", type="fact")
    assert memory.path is not None
    md.reconcile()
    memory.path.write_text(memory.path.read_text().replace("Frankfurt", "Dublin"))
    assert md.reconcile() is True  # the edit is indexed and MEMORY.md rewritten ...
    fingerprint, disk = fp.scan(memory.path.parent)
    assert _saved(md) == (fingerprint, fp.names_sum(disk))  # ... and nothing is left to do
    assert "Dublin" in md.get(memory.id).body
