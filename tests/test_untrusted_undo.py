"""An interrupted consolidation (or dream) can always be undone, byte for byte.

Real processes are killed with SIGKILL mid-plan: ``MEMDIR_TEST_PAUSE_AFTER=N`` makes a plan
pause once N files were written (the next file's before-image already journalled), the test
kills it there, then checks ``history``, ``doctor`` and ``undo`` through the real CLI. Also:
old history lines still undo, a torn last line loses nothing after it, and the stale temp
files of killed writers are listed by doctor and swept by the next write command, nothing
else touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from conftest import CLI
from memdir import Memdir
from memdir.core.model import now

PAST = now() - timedelta(days=300)
LINT = "Always run the linter before committing"


def _build(home: Path, repo: Path, pairs: int = 15) -> None:
    """Near-duplicate pairs (merges), weak memories (archives), daily-log lines (gathers),
    one of them already stored as the memory the gather makes (so the gather reinforces an
    existing file, which no plan lists up front)."""
    with Memdir(home=home, project=repo, clock=lambda: PAST) as md:
        for i in range(pairs):
            md.store(f"Deploys of the billing{i} service go through ArgoCD", type="decision")
            md.store(f"Deploys of the billing{i} service always go through ArgoCD",
                     type="decision")
        for i in range(5):
            md.store(f"The staging{i} host was rebooted", type="fact", relevance=0.1)
        md.log("Deployed 4.2 to production; the orders migration took 12 minutes")
        md.log(LINT, scope="user")
        md.store(LINT, type="preference", scope="user", relevance=0.7)


def _files(home: Path) -> dict[str, bytes]:
    """Every file of every memory directory (logs, consumed state, MEMORY.md included)."""
    out = {}
    for root in (home / "user", home / "projects"):
        for path in sorted(root.rglob("*")):
            if path.is_file():
                out[str(path.relative_to(home))] = path.read_bytes()
    return out


def _killed(home: Path, repo: Path, after: int, *args: str) -> None:
    """Run ``memdir ARGS`` until it has written ``after`` files, then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memdir", *args], cwd=repo, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_TEST_PAUSE_AFTER": str(after)})
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "pausing" in line, line + proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _history(cli: CLI) -> list[dict[str, object]]:
    result = cli("--json", "history", check=True)
    records = json.loads(result.stdout)
    assert isinstance(records, list)
    return records


@pytest.mark.parametrize("after", [0, 7, 31, 52])
@pytest.mark.parametrize("earlier", [False, True], ids=["alone", "after-a-plan"])
def test_a_killed_consolidation_is_listed_and_undone_byte_for_byte(
        cli: CLI, home: Path, repo: Path, after: int, earlier: bool) -> None:
    if earlier:  # an earlier, completed plan that must survive the undo of the killed one
        with Memdir(home=home, project=repo, clock=lambda: PAST) as md:
            md.store("Releases are cut on Tuesdays", type="decision")
            md.store("Releases are cut on Tuesdays by the release manager", type="decision")
        cli("consolidate", "--yes", check=True)
    _build(home, repo)
    before = _files(home)

    _killed(home, repo, after, "consolidate", "--yes")
    if after:
        assert _files(home) != before  # the kill left the plan half done

    records = _history(cli)
    assert len(records) == (2 if earlier else 1)
    assert records[-1]["interrupted"] is True and records[-1]["undone"] is False
    assert "(interrupted)" in cli("history", check=True).stdout.splitlines()[-1]
    doctor = cli("--json", "doctor")
    assert "interrupted-plan" in {p["kind"] for p in json.loads(doctor.stdout)}

    undo = cli("undo", check=True)
    assert undo.stdout.startswith("undid the interrupted plan begun at"), undo.stdout
    assert _files(home) == before  # every file as it was, the earlier plan's work included
    records = _history(cli)
    assert [r["undone"] for r in records] == ([False, True] if earlier else [True])
    assert "interrupted-plan" not in cli("doctor").stdout

    # The index follows the files: the merged pairs are active again, nothing is missing.
    with Memdir(home=home, project=repo) as md:
        assert len(md.list(types=["decision"])) == 30 + (1 if earlier else 0)
        assert not md.doctor()
    second = cli("undo", check=True).stdout
    assert second.startswith("undid the plan applied at") if earlier else \
        second.startswith("nothing to undo")


def test_a_killed_dream_is_undone_logs_and_gathered_memories_included(
        cli: CLI, home: Path, repo: Path) -> None:
    _build(home, repo, pairs=3)
    before = _files(home)
    consumed = [name for name in before if name.endswith(".consumed.json")]
    assert consumed == []  # nothing gathered yet

    # 3 merges (3 writes each) and 5 archives, then the user log's gather: its episode
    # created, the stored preference reinforced, logs/.consumed.json; killed before the
    # project log's consumed state.
    _killed(home, repo, 18, "dream", "--force")
    after_kill = _files(home)
    assert [n for n in after_kill if n.endswith(".consumed.json")]  # the logs were consumed
    assert any(b"Log of " in data for n, data in after_kill.items() if n not in before)
    preference = next(n for n in before if n.startswith("user/preference_"))
    assert after_kill[preference] != before[preference]  # reinforced: in no plan's list

    records = _history(cli)
    assert [(r["by"], r["interrupted"]) for r in records] == [("dream", True)]
    assert cli("undo", check=True).stdout.startswith("undid the interrupted plan")
    assert _files(home) == before  # gathered memories removed, consumed state gone, reinforced
    # preference back at its count: the next dream gathers the same lines again.
    again = cli("--json", "dream", "--force", check=True)
    assert json.loads(again.stdout)["ran"] is True  # the dead holder's lock is taken over
    assert [n for n in _files(home) if n.endswith(".consumed.json")]


def test_a_killed_undo_runs_again_to_the_same_result(cli: CLI, home: Path,
                                                     repo: Path) -> None:
    _build(home, repo)
    before = _files(home)
    cli("consolidate", "--yes", check=True)
    _killed(home, repo, 5, "undo")  # five files restored, then killed
    assert _files(home) != before
    assert [r["undone"] for r in _history(cli)] == [False]
    assert cli("undo", check=True).stdout.startswith("undid the plan applied at")
    assert _files(home) == before
    assert cli("undo", check=True).stdout.startswith("nothing to undo")


def test_a_completed_plan_undoes_the_files_no_plan_listed(cli: CLI, home: Path,
                                                          repo: Path) -> None:
    """A gathered log line reinforcing a stored memory, the consumed state, the gathered
    memories: none is in the plan's list of memories, all come back."""
    _build(home, repo, pairs=1)
    before = _files(home)
    cli("consolidate", "--yes", check=True)
    assert _files(home) != before
    assert cli("undo", check=True).stdout.startswith("undid the plan applied at")
    assert _files(home) == before


def test_a_file_created_by_the_plan_and_changed_since_is_kept(cli: CLI, home: Path,
                                                              repo: Path) -> None:
    _build(home, repo, pairs=1)
    cli("consolidate", "--yes", check=True)
    with Memdir(home=home, project=repo) as md:
        episode = next(m for m in md.list(scopes=["project"]) if m.body.startswith("Log of"))
        assert episode.path is not None
        edited = episode.path.read_text() + "\nEdited by hand after the plan.\n"
        episode.path.write_text(edited)
    undo = cli("undo", check=True)
    assert "kept:" in undo.stdout and episode.path.name in undo.stdout
    assert episode.path.read_text() == edited  # a hand edit is never lost to an undo


def test_history_lines_from_before_the_journal_still_undo(cli: CLI, home: Path,
                                                          repo: Path) -> None:
    with Memdir(home=home, project=repo) as md:
        a = md.store("Deploys go through ArgoCD", type="decision")
        b = md.store("Deploys go through ArgoCD and Helm", type="decision")
        assert a.path is not None and b.path is not None
        texts = {a.path: a.path.read_bytes(), b.path: b.path.read_bytes()}
        older = md.store("Tabs, not spaces", type="preference")
        md.archive(older.id)
        md.update(a.id, tags=["ops"])
        md.archive(b.id)
        md.restore(older.id)
    old_plan = {"applied": False, "operations": [{"op": "merge", "reason": "r", "scope":
                                                  "project", "memories": [a.id, b.id],
                                                  "changes": {}}]}
    lines = [
        # an older plan, already undone (the undo record names its time)
        {"at": "2026-01-01T00:00:00Z", "plan": old_plan, "before": [], "created": []},
        {"at": "2026-01-01T00:05:00Z", "undo": "2026-01-01T00:00:00Z"},
        {"at": "2026-02-01T00:00:00Z", "plan": old_plan, "created": [],
         "before": [{"id": a.id, "file": str(a.path), "status": "active",
                     "text": texts[a.path].decode()},
                    {"id": b.id, "file": str(b.path), "status": "active",
                     "text": texts[b.path].decode()}]},
    ]
    home.mkdir(parents=True, exist_ok=True)
    (home / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    records = _history(cli)
    assert [(r["at"], r["undone"], r["interrupted"]) for r in records] == [
        ("2026-01-01T00:00:00Z", True, False), ("2026-02-01T00:00:00Z", False, False)]
    assert cli("undo", check=True).stdout.startswith(
        "undid the plan applied at 2026-02-01T00:00:00Z")
    assert {p: p.read_bytes() for p in texts} == texts
    assert [r["undone"] for r in _history(cli)] == [True, True]
    assert cli("undo", check=True).stdout.startswith("nothing to undo")


def test_a_torn_last_history_line_loses_no_plan_after_it(cli: CLI, home: Path,
                                                          repo: Path) -> None:
    _build(home, repo, pairs=2)
    home.mkdir(parents=True, exist_ok=True)
    (home / "history.jsonl").write_text('{"begin": "x-torn", "at": "2026-')  # killed mid-line
    cli("consolidate", "--yes", check=True)
    records = _history(cli)
    assert [(r["interrupted"], r["undone"]) for r in records] == [(False, False)]
    assert cli("undo", check=True).stdout.startswith("undid the plan applied at")


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _plant(path: Path, age: float, text: str = "partial") -> Path:
    """A file written ``age`` seconds ago."""
    path.write_text(text)
    when = time.time() - age
    os.utime(path, (when, when))
    return path


@pytest.mark.parametrize("command", [("store", "A new fact about caching", "--type", "fact"),
                                     ("consolidate", "--yes"), ("dream", "--force"),
                                     ("reindex",), ("undo",)])
def test_stale_temp_files_are_listed_and_swept_by_the_next_write(
        cli: CLI, home: Path, repo: Path, tmp_path: Path, command: tuple[str, ...]) -> None:
    with Memdir(home=home, project=repo) as md:
        md.store("Caching uses Redis", type="fact")
        folder = md.directory("project").path
    (folder / "logs").mkdir()
    dead, live = _dead_pid(), os.getpid()
    stale = [  # memdir's own names, the writer dead (past its grace minute) or over an hour old
        _plant(folder / f".fact_a.md.{dead}.0123abcd.tmp", 120),
        _plant(folder / f".fact_b.md.{live}.89abcdef.tmp", 2 * 3600),  # a reused pid
        _plant(folder / "logs" / f".consumed.json.{dead}.00ff00ff.tmp", 120),
        _plant(home / f".consolidate-lock.{dead}", 2 * 3600, str(dead)),
    ]
    young = _plant(folder / f".fact_c.md.{dead}.11111111.tmp", 0)  # still in its grace minute
    kept = [  # a live writer's, and names memdir does not give
        young, _plant(folder / f".fact_d.md.{live}.22222222.tmp", 0),
        *(_plant(folder / name, 2 * 3600, "someone else's")
          for name in (".notes.tmp", ".fact_e.md.123.tmp", "x.0123abcd.tmp",
                       f".fact_f.md.{dead}.0123abcd.tmp.bak"))]
    outside = tmp_path / "outside.txt"
    outside.write_text("not memdir's")
    link = folder / f".fact_g.md.{dead}.33333333.tmp"
    link.symlink_to(outside)
    directory = folder / f".fact_h.md.{dead}.44444444.tmp"
    directory.mkdir()
    when = time.time() - 2 * 3600
    os.utime(link, (when, when), follow_symlinks=False)
    os.utime(directory, (when, when))

    found = json.loads(cli("--json", "doctor").stdout)
    killed = {Path(p["where"]).name for p in found if "killed memdir process" in p["message"]}
    assert killed == {p.name for p in stale} | {young.name}

    marker = home / ".temp-sweep"  # the last sweep (storing above): a while ago now
    os.utime(marker, (when, when))
    cli(*command, check=True)
    assert not [p for p in stale if os.path.lexists(p)]
    assert all(p.exists() for p in kept)
    assert link.is_symlink() and outside.read_text() == "not memdir's"
    assert directory.is_dir()


def test_single_writes_sweep_at_most_every_few_minutes(cli: CLI, home: Path,
                                                       repo: Path) -> None:
    cli("store", "Caching uses Redis", "--type", "fact", check=True)  # sweeps, marks the time
    with Memdir(home=home, project=repo) as md:
        folder = md.directory("project").path
    left = _plant(folder / f".fact_a.md.{_dead_pid()}.0123abcd.tmp", 120)
    cli("store", "Caching uses Memcached", "--type", "fact", check=True)
    assert left.exists()  # swept a moment ago: a single write costs one stat
    cli("reindex", check=True)  # the bulk write commands always sweep
    assert not left.exists()


def test_undo_never_writes_through_a_symlink_planted_since_the_plan(
        cli: CLI, home: Path, repo: Path, tmp_path: Path) -> None:
    _build(home, repo, pairs=4)
    _killed(home, repo, 6, "consolidate", "--yes")
    with Memdir(home=home, project=repo) as md:
        project = md.directory("project").path
    touched = sorted(p for p in project.glob("decision_*.md"))
    outside = tmp_path / "outside.md"
    outside.write_text("the user's own file\n")
    touched[0].unlink()
    touched[0].symlink_to(outside)  # a memory file swapped for a symlink out
    moved = tmp_path / "moved"
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    project.rename(moved)
    project.symlink_to(decoy)  # the whole directory swapped for a symlink elsewhere
    undo = cli("undo", check=True)
    assert "kept:" in undo.stdout and "symlink" in undo.stdout
    assert os.listdir(decoy) == []  # nothing written where the symlink leads
    assert outside.read_text() == "the user's own file\n"
    # Back in place: the symlink planted inside is left alone and reported, never written
    # through; the other files are restored.
    project.unlink()
    moved.rename(project)
    (home / "history.jsonl").write_text(  # the undo record dropped: undo once more
        "".join(line + "\n" for line in (home / "history.jsonl").read_text().splitlines()
                if '"undo"' not in line))
    again = cli("undo", check=True).stdout
    assert [line for line in again.splitlines() if "kept:" in line] == [
        f"  kept: {project}/{touched[0].name}: path {touched[0].name!r} resolves through a "
        f"symlink to {outside}, outside {project}"]
    assert outside.read_text() == "the user's own file\n"
    assert all(not p.is_symlink() and p.read_text().startswith("---") for p in touched[1:])


def test_only_the_newest_journals_are_kept(home: Path, repo: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import memdir.upkeep.history as history_module
    from memdir.core.errors import MemoryNotFoundError

    monkeypatch.setattr(history_module, "KEEP_JOURNALS", 2)
    folder = home / "history"
    orphan_old = folder / "20200101T000000Z-0000aaaa"  # killed before its begin record
    orphan_new = folder / "20200101T000000Z-0000bbbb"  # another process's, just begun
    for orphan in (orphan_old, orphan_new):
        orphan.mkdir(parents=True)
        (orphan / "before.jsonl").write_text("")
    os.utime(orphan_old, (time.time() - 7200, time.time() - 7200))
    with Memdir(home=home, project=repo) as md:
        for n in range(3):
            md.store(f"Releases of app{n} are cut on Tuesdays", type="decision")
            md.store(f"Releases of app{n} are cut on Tuesdays by Ana", type="decision")
            assert md.consolidate(dry_run=False).operations
        ids = [r["id"] for r in md.history()]
        assert sorted(p.name for p in folder.iterdir()) == sorted([*ids[1:], orphan_new.name])
        assert md.undo() is not None and md.undo() is not None
        files = {p: p.read_bytes() for p in md.directory("project").path.glob("*.md")}
        with pytest.raises(MemoryNotFoundError, match="no longer kept") as caught:
            md.undo()
        assert "backup" in caught.value.hint
        assert {p: p.read_bytes() for p in md.directory("project").path.glob("*.md")} == files
