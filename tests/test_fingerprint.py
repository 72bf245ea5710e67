"""Directory fingerprints carried over memdir's own writes: the next command does not compare
every row with the files memdir just wrote itself, and never misses what another program did
to the directory while memdir was writing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import memdir.core.placing
from memdir import Memdir
from memdir.core import fingerprint as fp

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
    real = memdir.core.placing.regenerate_index

    def meanwhile(conn: object, mdir: memdir.core.store.MemoryDir, *rest: object) -> None:
        # Another program acts while memdir holds the write lock, its files written.
        change(mdir.path)
        real(conn, mdir, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(memdir.core.placing, "regenerate_index", meanwhile)
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


def test_an_index_without_a_names_checksum_carries_nothing(home: Path, repo: Path) -> None:
    # A long-lived instance (no reconcile before the write), as an MCP server holds one.
    with Memdir(home=home, project=repo, sync_interval=3600) as md:
        md.store("Something to fingerprint", type="fact")
        md.reconcile()
        key = md.directory("project").key
        with md.index.write() as conn:  # as an index saved before the checksum existed
            conn.execute("UPDATE dir_state SET names = NULL WHERE dir = ?", (key,))
        md.store_many(_batch(3, "delta"))
        assert _saved(md) == ("", None)  # not carried, forgotten: the next reconcile compares
        assert md.reconcile() is False  # ... finds every row matching, and saves a fresh one
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


@pytest.mark.parametrize("change", ["update", "delete"])
def test_a_file_restored_after_an_update_or_a_delete_is_seen(home: Path, repo: Path,
                                                             tmp_path: Path, change: str) -> None:
    """update and delete do not carry the fingerprint: they forget it, so the next write cannot
    stamp the old row with a fresh directory mtime and hide a restore (``cp -p``) for good."""
    backup = tmp_path / "backup"
    backup.mkdir()
    with Memdir(home=home, project=repo, sync_interval=3600) as md:
        victim = md.store("The zeppelin hangar key is in the office safe", type="fact",
                          name="victim")
        md.store("Releases go out on Tuesdays", type="decision")
        md.reconcile()
        assert victim.path is not None
        shutil.copy2(victim.path, backup / victim.path.name)
        if change == "update":
            md.update(victim.id, content="The dirigible hangar key is in the office safe")
        else:
            md.delete(victim.id)
        shutil.copy2(backup / victim.path.name, victim.path)  # restored, timestamps and all
        md.store("The VPN gateway is in Frankfurt", type="fact")
    with Memdir(home=home, project=repo, sync_interval=0) as fresh:
        assert [h.memory.id for h in fresh.search("zeppelin")] == [victim.id]
        assert fresh.search("dirigible") == []


def test_a_write_that_cannot_carry_forgets_the_fingerprint(home: Path, repo: Path) -> None:
    with Memdir(home=home, project=repo, sync_interval=3600) as md:
        md.store("The first memory", type="fact")
        md.reconcile()
        scratch = md.directory("project").path / "scratch.md"
        scratch.write_text(OTHER)  # another program's file: the carry's count is off
        doomed = md.store("The zeppelin hangar key is in the office safe", type="fact")
        assert _saved(md) == ("", None)
        scratch.unlink()
        assert doomed.path is not None
        doomed.path.unlink()  # removed by hand
        md.store("The VPN gateway is in Frankfurt", type="fact")  # this one carries nothing
    with Memdir(home=home, project=repo, sync_interval=0) as fresh:
        assert fresh.search("zeppelin") == []
        assert sorted(m.name for m in fresh.list()) == ["The VPN gateway is in Frankfurt",
                                                        "The first memory"]


def test_a_rename_in_the_clock_tick_of_a_write_is_seen(home: Path, repo: Path) -> None:
    """Coarse timestamps: a rename in the same tick as memdir's write leaves the directory's
    mtime as it was (emulated by setting it back). The carried fingerprint is racy, so the
    next reconcile checks the names too."""
    with Memdir(home=home, project=repo, sync_interval=3600) as md:
        md.store("The first memory", type="fact")
        md.reconcile()
        victim = md.store("The zeppelin hangar key is in the office safe", type="fact",
                          name="victim")
        assert victim.path is not None
        folder = victim.path.parent
        tick = os.stat(folder).st_mtime_ns
        victim.path.rename(folder / "fact_renamed-by-hand.md")
        os.utime(folder, ns=(os.stat(folder).st_atime_ns, tick))
    with Memdir(home=home, project=repo, sync_interval=0) as fresh:
        found = fresh.get(victim.id)
        assert found.path is not None and found.path.name == "fact_renamed-by-hand.md"


def test_a_racy_fingerprint_is_saved_again_once_the_directory_settles(md: Memdir) -> None:
    md.store("The first memory", type="fact")
    md.reconcile()
    key, folder = md.directory("project").key, md.directory("project").path
    saved = fp.load(md.index.conn, key)
    assert saved is not None and saved.racy  # saved just after the write
    old = os.stat(folder).st_mtime_ns - 2 * fp.RACY_NS
    os.utime(folder, ns=(old, old))  # the directory's last change is now well in the past
    fingerprint, _ = fp.scan(folder)
    with md.index.write() as conn:  # ... but the fingerprint was saved in the same tick
        conn.execute("UPDATE dir_state SET fingerprint = ?, saved_ns = ? WHERE dir = ?",
                     (fingerprint, old, key))
    racy = fp.load(md.index.conn, key)
    assert racy is not None and racy.racy
    assert md.reconcile() is False  # trusted by its names, and saved again
    settled = fp.load(md.index.conn, key)
    assert settled is not None and not settled.racy and settled.gen == racy.gen + 1
    assert md.reconcile() is False  # trusted on the fingerprint alone: nothing written
    assert fp.load(md.index.conn, key) == settled


def test_an_unlocked_save_leaves_a_newer_row_alone(md: Memdir) -> None:
    md.store("The first memory", type="fact")
    md.reconcile()
    key = md.directory("project").key
    read = fp.load(md.index.conn, key)  # what a reconcile reads before its scan
    fingerprint, disk = fp.scan(md.directory("project").path)
    with md.index.write() as conn:  # meanwhile another process deletes a memory
        fp.forget(conn, key)
    sql, params = fp.save_unless_changed(key, fingerprint, fp.names_sum(disk), read)
    with md.index.write() as conn:
        conn.execute(sql, params)
    assert _saved(md) == ("", None)  # the older listing did not overwrite the newer row
    sql, params = fp.save_unless_changed(key, fingerprint, fp.names_sum(disk),
                                         fp.load(md.index.conn, key))
    with md.index.write() as conn:
        conn.execute(sql, params)
    assert _saved(md) == (fingerprint, fp.names_sum(disk))
