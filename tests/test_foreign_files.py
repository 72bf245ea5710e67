"""Files memdir did not write, or that changed under it since it indexed them: memdir never
overwrites or deletes them, and never writes outside its directory because of them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import memdir.core.placing
import memdir.core.store
from memdir import Memdir
from memdir.core.errors import DuplicateNameError, MemoryNotFoundError
from memdir.core.files import INDEX_KEEP, atomic_write
from memdir.core.model import Memory


@pytest.fixture
def slow(home: Path, repo: Path) -> Memdir:
    """A long-lived instance (an MCP or HTTP server) that reconciles at most once an hour."""
    return Memdir(home=home, project=repo, sync_interval=3600)


def test_a_duplicate_of_a_file_edited_since_it_was_indexed_is_stored_anew(slow: Memdir) -> None:
    first = slow.store("Deploys go out on Tuesdays", type="project")
    assert first.path is not None
    edited = first.path.read_text().replace("Tuesdays", "Thursdays, never Fridays")
    first.path.write_text(edited)  # by hand, not yet reconciled
    again = slow.store("Deploys go out on Tuesdays", type="project")
    assert again.path != first.path and again.reinforced == 0
    assert first.path.read_text() == edited  # the hand edit is kept as written
    assert "Tuesdays" in again.path.read_text()  # type: ignore[union-attr]
    slow.reconcile()
    assert {h.memory.id for h in slow.search("thursdays")} == {first.id}
    assert {h.memory.id for h in slow.search("tuesdays")} == {again.id}


def test_update_and_delete_never_touch_another_file_under_the_memorys_old_name(
        slow: Memdir) -> None:
    a = slow.store("The zeppelin hangar key is in the office safe", type="fact", name="a")
    b = slow.store("The VPN gateway is in Frankfurt", type="fact", name="b")
    assert a.path is not None and b.path is not None
    moved = a.path.with_name("fact_moved-by-hand.md")
    a.path.rename(moved)  # another program renames a and puts its own note under a's name
    note = "---\nname: Human note\ntype: fact\n---\nMy own notes, not a memory of memdir.\n"
    a.path.write_text(note)
    updated = slow.update(a.id, content="The airship hangar key is in the office safe")
    assert updated.id == a.id and updated.path == moved
    assert a.path.read_text() == note and "airship" in moved.read_text()
    b.path.rename(b.path.with_name("fact_b-elsewhere.md"))
    b.path.write_text(note)
    slow.delete(b.id)
    assert b.path.read_text() == note and not b.path.with_name("fact_b-elsewhere.md").exists()
    with pytest.raises(MemoryNotFoundError):
        slow.get(b.id)


def test_index_pages_never_replace_or_delete_files_memdir_did_not_write(
        slow: Memdir, tmp_path: Path) -> None:
    folder = slow.directory("project").path
    folder.mkdir(parents=True, exist_ok=True)
    mine = folder / "index"
    mine.mkdir()
    (mine / "journal.md").write_text("my journal\n")  # a user's own folder named index
    (mine / "fact.md").write_text("my facts\n")
    slow.store_many([{"content": f"Fact number {n} about the build", "type": "fact"}
                     for n in range(INDEX_KEEP + 20)])
    assert (mine / "journal.md").read_text() == "my journal\n"
    assert (mine / "fact.md").read_text() == "my facts\n"


def test_an_index_symlink_out_of_the_directory_is_not_followed(slow: Memdir,
                                                               tmp_path: Path) -> None:
    victim = tmp_path / "victim_notes"
    victim.mkdir()
    (victim / "todo.md").write_text("buy milk\n")
    folder = slow.directory("project").path
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index").symlink_to(victim)
    slow.store_many([{"content": f"Fact number {n} about the build", "type": "fact"}
                     for n in range(INDEX_KEEP + 20)])
    assert sorted(os.listdir(victim)) == ["todo.md"]
    assert (victim / "todo.md").read_text() == "buy milk\n"


def test_a_memory_md_memdir_did_not_write_is_kept_byte_for_byte(slow: Memdir) -> None:
    folder = slow.directory("project").path
    folder.mkdir(parents=True, exist_ok=True)
    raw = b"# My index\n\ncaf\xe9 notes in Latin-1\n"
    (folder / "MEMORY.md").write_bytes(raw)
    slow.store("The CDN is Fastly", type="fact")
    assert (folder / "MEMORY.md.orig").read_bytes() == raw


@pytest.mark.parametrize("field", ["reinforced: 99999999999999999999999",
                                   "updated: 0001-01-01T00:00:00+05:00",
                                   "created: 9999-12-31T23:00:00-05:00"])
def test_a_value_out_of_range_makes_one_file_broken_not_every_read(md: Memdir,
                                                                   field: str) -> None:
    md.store("The CDN is Fastly", type="fact")
    folder = md.directory("project").path
    (folder / "fact_odd.md").write_text(f"---\nname: Odd\ntype: fact\n{field}\n---\nOdd one.\n")
    assert [h.memory.name for h in md.search("fastly")] == ["The CDN is Fastly"]
    assert "Fastly" in md.context().text
    assert [p.where.endswith("fact_odd.md") for p in md.doctor()] == [True]


def test_nan_and_infinity_in_meta_do_not_break_the_session_context(md: Memdir) -> None:
    folder = md.directory("project").path
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "procedure_deploy.md").write_text(
        "---\nname: Deploy\ntype: procedure\nnotes: .nan\nlimit: .inf\n---\n"
        "Run make deploy, then watch the dashboard.\n")
    context = md.context(query="deploy")
    assert "make deploy" in context.text
    assert md.search("deploy")[0].memory.meta == {"notes": "nan", "limit": "inf"}


NOTE = "---\nname: Human note\ntype: fact\n---\nMy own notes, written with O_EXCL.\n"


@pytest.mark.parametrize("size", [10, 100])  # one file at a time, and the threaded batch
def test_a_file_created_under_a_planned_name_mid_batch_is_never_overwritten(
        md: Memdir, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    folder = md.directory("project").path
    last = folder / f"fact_item-{size - 1}.md"
    render = memdir.core.placing.render

    def render_and_race(memory: Memory) -> str:
        if memory.name == "item 0":  # another program takes the last planned name meanwhile
            last.write_text(NOTE)
        return render(memory)

    items = [{"content": f"Batch memory {i}", "type": "fact", "name": f"item {i}"}
             for i in range(size)]
    monkeypatch.setattr(memdir.core.placing, "render", render_and_race)
    with pytest.raises(DuplicateNameError, match=f"another program created {last.name}"):
        md.store_many(items)
    assert last.read_text() == NOTE
    assert sorted(p.name for p in folder.glob("fact_*.md")) == [last.name]  # only its own
    assert [m.name for m in md.list()] == ["Human note"]  # indexed as what it is
    monkeypatch.setattr(memdir.core.placing, "render", render)
    assert len(md.store_many(items)) == size  # run again: another name for the last one
    assert last.read_text() == NOTE


def test_an_exclusive_write_never_replaces_an_existing_file(tmp_path: Path) -> None:
    tmp_path = tmp_path / "dir"
    tmp_path.mkdir()
    target = tmp_path / "fact_taken.md"
    target.write_text(NOTE)
    with pytest.raises(FileExistsError):
        atomic_write(target, "new text", exclusive=True)
    assert target.read_text() == NOTE and sorted(os.listdir(tmp_path)) == ["fact_taken.md"]
    atomic_write(tmp_path / "fact_free.md", "new text", exclusive=True)
    assert (tmp_path / "fact_free.md").read_text() == "new text"


def test_a_rename_never_overwrites_a_file_created_under_the_new_name_meanwhile(
        md: Memdir, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = md.store("Deploys go out on Tuesdays", type="fact")
    assert memory.path is not None
    target = memory.path.with_name("decision_deploys-go-out-on-tuesdays.md")
    render = memdir.core.store.render

    def render_and_race(m: Memory) -> str:
        if m.type == "decision":  # another program takes the new name meanwhile
            target.write_text(NOTE)
        return render(m)

    monkeypatch.setattr(memdir.core.store, "render", render_and_race)
    with pytest.raises(DuplicateNameError, match=f"another program created {target.name}"):
        md.reclassify(memory.id, "decision")
    assert target.read_text() == NOTE
    assert "Tuesdays" in memory.path.read_text()  # the memory is as it was
