"""Files memdir did not write, in any memory directory (user, project, team): a symlink or a
special file is never followed, read, waited on, copied or replaced; a file over its size
cap is never read whole. Every command skips them and leaves them exactly as they were;
doctor names them with a fix.

Real parts only: real symlinks, FIFOs and /dev/zero, the real CLI and hook in subprocesses
(with timeouts: before the fix, a FIFO or /dev/zero made them read forever).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CLI, cli_json
from memdir import Memdir

SCOPES = ["user", "project", "team"]
OUTSIDE = b"---\nname: Outside\ntype: fact\n---\nquetzal secret from outside the repository\n"
GOOD = "---\nname: Good\ntype: fact\n---\nThe quetzal build runs on Fridays.\n"


def _folder(home: Path, repo: Path, scope: str) -> Path:
    with Memdir(home=home, project=repo) as md:
        path = md.directory(scope).path  # type: ignore[arg-type]
    path.mkdir(parents=True, exist_ok=True)
    return path


def _plant(folder: Path, name: str, kind: str, outside: Path) -> None:
    """Put a file memdir did not write at ``folder/name``: a symlink out, /dev/zero, a FIFO."""
    if kind == "symlink":
        outside.write_bytes(OUTSIDE)
        (folder / name).symlink_to(outside)
    elif kind == "devzero":
        (folder / name).symlink_to("/dev/zero")
    else:
        os.mkfifo(folder / name)


def _left_alone(folder: Path, name: str, kind: str, outside: Path) -> None:
    path = folder / name
    if kind == "fifo":
        assert path.is_fifo()
    else:
        assert path.is_symlink()
        assert os.readlink(path) == ("/dev/zero" if kind == "devzero" else str(outside))
    if kind == "symlink":
        assert outside.read_bytes() == OUTSIDE
    assert not (folder / (name + ".orig")).exists()
    assert not os.path.lexists(folder / "MEMORY.md.orig")


def _run(home: Path, repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, with a timeout: before the fix a FIFO or /dev/zero made it read forever."""
    return subprocess.run([sys.executable, "-m", "memdir", *args], cwd=repo, capture_output=True,
                          text=True, timeout=30, env={**os.environ, "MEMDIR_HOME": str(home)})


# -- MEMORY.md and memory files that are symlinks or special files --------------------------


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", ["MEMORY.md", "fact_planted.md"])
@pytest.mark.parametrize("kind", ["symlink", "devzero", "fifo"])
def test_every_command_skips_a_planted_file_and_leaves_it_as_it_was(
        home: Path, repo: Path, tmp_path: Path, scope: str, name: str, kind: str) -> None:
    folder = _folder(home, repo, scope)
    (folder / "fact_good.md").write_text(GOOD)
    outside = tmp_path / "outside.md"
    _plant(folder, name, kind, outside)

    stored = _run(home, repo, "--json", "store", "The quetzal cache is warmed at 6am",
                  "--type", "fact", "--scope", scope)
    assert stored.returncode == 0, stored.stderr
    listed = cli_json(_run(home, repo, "--json", "list", "--scope", scope))
    assert isinstance(listed, list)
    assert sorted(m["name"] for m in listed) == ["Good", "The quetzal cache is warmed at 6am"]
    found = cli_json(_run(home, repo, "--json", "search", "quetzal"))
    assert isinstance(found, list) and len(found) == 2
    context = _run(home, repo, "context")
    assert context.returncode == 0 and "Fridays" in context.stdout
    assert "secret from outside" not in context.stdout + str(found) + str(listed)
    assert _run(home, repo, "reindex").returncode == 0
    doctor = _run(home, repo, "--json", "doctor")
    assert doctor.returncode == 1
    problems = [p for p in json.loads(doctor.stdout) if p["kind"] == "unsafe-file"]
    assert [p["where"] for p in problems] == [str(folder / name)]
    assert problems[0]["hint"] == "remove it or replace it with a regular file"
    _left_alone(folder, name, kind, outside)


@pytest.mark.parametrize("kind", ["devzero", "fifo"])
def test_the_session_start_hook_finishes_at_once_past_a_planted_file(
        home: Path, repo: Path, tmp_path: Path, kind: str) -> None:
    team = repo / ".memdir" / "team"
    team.mkdir(parents=True)
    (team / "fact_good.md").write_text(GOOD)
    _plant(team, "MEMORY.md", kind, tmp_path / "outside.md")
    _plant(team, "policy_planted.md", kind, tmp_path / "outside.md")
    payload = json.dumps({"session_id": "s1", "cwd": str(repo), "source": "startup"})
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "memdir", "hook", "session-start"],
                            input=payload, cwd=repo, capture_output=True, text=True, timeout=30,
                            env={**os.environ, "MEMDIR_HOME": str(home)})
    assert result.returncode == 0 and result.stderr == ""
    assert "Fridays" in result.stdout
    assert time.monotonic() - started < 20  # the hook's own limit is 5 s; it needs no limit
    _left_alone(team, "MEMORY.md", kind, tmp_path / "outside.md")
    _left_alone(team, "policy_planted.md", kind, tmp_path / "outside.md")


def test_a_committed_memory_md_symlink_is_never_copied_into_the_tree(
        md: Memdir, repo: Path, tmp_path: Path) -> None:
    # The reported case: a plain read replaced the link with a regular file and wrote the
    # outside file's bytes to MEMORY.md.orig, ready to be committed.
    team = repo / ".memdir" / "team"
    team.mkdir(parents=True)
    (team / "fact_good.md").write_text(GOOD)
    outside = tmp_path / "private-notes.txt"
    _plant(team, "MEMORY.md", "symlink", outside)
    assert "Fridays" in md.context().text
    md.store("Team rule: review before merge", type="policy", scope="team")
    assert sorted(os.listdir(team)) == ["MEMORY.md", "fact_good.md", "policy_team-rule-review-"
                                        "before-merge.md"]
    _left_alone(team, "MEMORY.md", "symlink", outside)


def test_a_symlink_to_a_memory_of_the_same_directory_is_not_indexed_twice(md: Memdir) -> None:
    folder = md.directory("project").path
    folder.mkdir(parents=True)
    (folder / "fact_real.md").write_text(GOOD)
    (folder / "fact_alias.md").symlink_to("fact_real.md")
    assert [m.path.name for m in md.list() if m.path] == ["fact_real.md"]
    assert [p.where for p in md.doctor()] == [str(folder / "fact_alias.md")]


def test_a_memory_file_swapped_for_a_symlink_is_never_written_through(md: Memdir) -> None:
    memory = md.store("The quetzal deploy key rotates monthly", type="fact")
    assert memory.path is not None
    outside = memory.path.with_name("notes.txt")  # inside the directory: no traversal
    outside.write_text(memory.path.read_text())
    before = outside.read_bytes()
    memory.path.unlink()
    memory.path.symlink_to(outside.name)
    for change in (lambda: md.update(memory.id, content="Rotates weekly now"),
                   lambda: md.delete(memory.id)):
        with pytest.raises(Exception) as caught:
            change()
        assert getattr(caught.value, "hint", "")  # a memdir error, with a fix
    assert memory.path.is_symlink() and outside.read_bytes() == before


# -- files over their cap -------------------------------------------------------------------


def test_a_50_mb_memory_file_is_skipped_with_a_doctor_problem(md: Memdir) -> None:
    folder = md.directory("team").path
    folder.mkdir(parents=True)
    (folder / "fact_good.md").write_text(GOOD)
    huge = folder / "fact_huge.md"
    with open(huge, "wb") as fh:  # sparse: 50 MB on paper, nothing on disk
        fh.write(b"---\nname: Huge\ntype: fact\n---\nquetzal ")
        fh.truncate(50 * 1024 * 1024)
    state = huge.stat()
    assert [m.name for m in md.list(scopes=["team"])] == ["Good"]
    assert "Fridays" in md.context().text
    problems = [p for p in md.doctor() if p.where == str(huge)]
    assert len(problems) == 1 and problems[0].kind == "broken-file"
    assert "52,428,800 bytes" in problems[0].message and "split it" in problems[0].hint
    assert (huge.stat().st_size, huge.stat().st_mtime_ns) == (state.st_size, state.st_mtime_ns)


def test_a_memory_too_large_for_its_file_is_refused_before_anything_is_written(
        md: Memdir) -> None:
    from memdir.core.errors import InvalidMemoryError

    with pytest.raises(InvalidMemoryError) as caught:
        md.store("word " * 200_000, type="fact")
    assert "bytes" in caught.value.message and "short note" in caught.value.hint
    assert md.list() == []


def test_a_symlink_or_a_device_is_refused_before_any_read(tmp_path: Path) -> None:
    # /dev/zero reports size 0 and never ends: it must be refused, not read up to a cap.
    from memdir.core.errors import UnsafeFileError
    from memdir.core.safe_open import MEMORY_FILE, read_file

    link = tmp_path / "zero.md"
    link.symlink_to("/dev/zero")
    with pytest.raises(UnsafeFileError) as caught:
        read_file(link, MEMORY_FILE)
    assert "a symlink" in caught.value.message
    with pytest.raises(UnsafeFileError) as caught:
        read_file("/dev/zero", MEMORY_FILE, follow=True)  # a device: refused before reading
    assert "a device" in caught.value.message


# -- directories below a memory directory, and the team directory itself -------------------


def test_a_symlinked_logs_folder_is_never_written_through(home: Path, repo: Path,
                                                          tmp_path: Path, cli: CLI) -> None:
    folder = _folder(home, repo, "project")
    victim = tmp_path / "victim"
    victim.mkdir()
    (folder / "logs").symlink_to(victim, target_is_directory=True)
    result = cli("log", "Deployed 4.2")
    assert result.returncode != 0 and "symlink" in result.stderr
    assert "replace it with a regular file" in result.stderr.lower()
    assert list(victim.iterdir()) == []
    doctor = json.loads(cli("--json", "doctor").stdout)
    assert [p["where"] for p in doctor if p["kind"] == "unsafe-file"] == [str(folder / "logs")]


def test_daily_logs_behind_symlinks_are_not_gathered(md: Memdir, tmp_path: Path) -> None:
    from datetime import datetime

    from memdir.upkeep.logs import append_log, unconsumed

    folder = md.directory("project").path
    folder.mkdir(parents=True)
    append_log(folder, "Deployed quetzal 4.2", datetime(2026, 11, 20, 9, 0).astimezone())
    elsewhere = tmp_path / "elsewhere" / "11"
    elsewhere.mkdir(parents=True)
    (elsewhere / "2025-11-01.md").write_text("- 09:00:00 stolen line\n")
    (folder / "logs" / "2025").mkdir()
    (folder / "logs" / "2025" / "11").symlink_to(elsewhere, target_is_directory=True)
    day = folder / "logs" / "2026" / "11"
    (day / "2026-11-21.md").symlink_to(elsewhere / "2025-11-01.md")
    os.mkfifo(day / "2026-11-22.md")
    stolen = tmp_path / "stolen.json"  # says the line above was gathered already
    stolen.write_text(json.dumps({"2026/11/2026-11-20.md": 1}))
    (folder / "logs" / ".consumed.json").symlink_to(stolen)
    texts = [text for lines in unconsumed(folder) for text in lines.texts]
    assert texts == ["Deployed quetzal 4.2"]
    where = sorted(Path(p.where).name for p in md.doctor())
    assert where == [".consumed.json", "11", "2026-11-21.md", "2026-11-22.md"]


# -- import --------------------------------------------------------------------------------


def test_import_follows_no_symlink_below_the_folder(home: Path, repo: Path,
                                                   tmp_path: Path) -> None:
    src = tmp_path / "export"
    (src / "project").mkdir(parents=True)
    (src / "project" / "fact_good.md").write_text(GOOD)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "fact_stolen.md").write_bytes(OUTSIDE)
    (src / "project" / "fact_link.md").symlink_to(outside / "fact_stolen.md")
    (src / "linked").symlink_to(outside, target_is_directory=True)
    os.mkfifo(src / "project" / "fact_fifo.md")
    (src / "project" / "fact_zero.md").symlink_to("/dev/zero")
    result = _run(home, repo, "--json", "import", str(src))
    with Memdir(home=home, project=repo) as md:
        assert [m.name for m in md.list()] == ["Good"]
    assert "secret from outside" not in result.stdout
    for name in ("fact_link.md", "fact_fifo.md", "fact_zero.md"):
        assert name in result.stdout + result.stderr
    assert (outside / "fact_stolen.md").read_bytes() == OUTSIDE


def test_import_of_a_fifo_fails_at_once_with_a_fix(home: Path, repo: Path,
                                                   tmp_path: Path) -> None:
    fifo = tmp_path / "memories.jsonl"
    os.mkfifo(fifo)
    result = _run(home, repo, "import", str(fifo))
    assert result.returncode != 0
    assert "not a regular file" in result.stderr and "hint:" in result.stderr


# -- what memdir keeps or replaces ----------------------------------------------------------


def test_a_hand_written_memory_md_is_kept_as_the_very_file_not_a_copy(md: Memdir) -> None:
    folder = md.directory("project").path
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text("# My own index\n\n- notes\n")
    before = os.stat(folder / "MEMORY.md")
    md.store("The quetzal cache is warmed at 6am", type="fact")
    kept = os.stat(folder / "MEMORY.md.orig")
    assert (kept.st_ino, kept.st_mode) == (before.st_ino, before.st_mode)  # linked, not copied
    assert (folder / "MEMORY.md.orig").read_text() == "# My own index\n\n- notes\n"
    assert "quetzal" in (folder / "MEMORY.md").read_text()


def test_a_mirror_file_that_is_a_symlink_is_never_replaced(md: Memdir, tmp_path: Path) -> None:
    from memdir.core.errors import MemdirError
    from memdir.core.store import MemoryDir
    from memdir.team.mirror import file_name, place

    memory = md.store("The quetzal team uses trunk-based development", type="fact")
    mirror = MemoryDir("team", tmp_path / "mirror", md.directory("team").taxonomy)
    mirror.path.mkdir()
    outside = mirror.path / "notes.txt"  # inside the folder: no traversal, still not ours
    outside.write_bytes(OUTSIDE)
    link = mirror.path / file_name(memory.replace(scope="team"))
    link.symlink_to(outside.name)
    with pytest.raises(MemdirError) as caught:
        place(mirror, memory)
    assert caught.value.hint == "remove it or replace it with a regular file"
    assert link.is_symlink() and outside.read_bytes() == OUTSIDE


def test_doctor_names_oversized_logs_and_pages_that_are_skipped(md: Memdir) -> None:
    from datetime import datetime

    from memdir.upkeep.logs import append_log, unconsumed

    folder = md.directory("project").path
    path = append_log(folder, "Deployed quetzal 4.2", datetime(2026, 11, 20, 9).astimezone())
    big = path.with_name("2026-11-21.md")
    with open(big, "wb") as fh:
        fh.write(b"- 09:00:00 a line of a log far too large\n")
        fh.truncate(20 * 1024 * 1024)
    (folder / "index").mkdir()
    with open(folder / "index" / "fact.md", "wb") as fh:
        fh.truncate(2 * 1024 * 1024)
    assert [t for lines in unconsumed(folder) for t in lines.texts] == ["Deployed quetzal 4.2"]
    found = {Path(p.where).name: p for p in md.doctor() if p.kind == "unsafe-file"}
    assert sorted(found) == ["2026-11-21.md", "fact.md"]
    assert "20,971,520 bytes" in found["2026-11-21.md"].message
    assert "regenerates" in found["fact.md"].hint


@pytest.mark.parametrize("kind", ["symlink", "devzero", "fifo"])
def test_a_committed_settings_file_that_is_not_a_regular_file_is_ignored(
        home: Path, repo: Path, tmp_path: Path, kind: str) -> None:
    (repo / ".memdir").mkdir()
    outside = tmp_path / "settings.toml"
    outside.write_text('[team]\ntaxonomy = "cognova"\n')  # valid: only the link is wrong
    if kind == "symlink":
        (repo / ".memdir" / "config.toml").symlink_to(outside)
    elif kind == "devzero":
        (repo / ".memdir" / "config.toml").symlink_to("/dev/zero")
    else:
        os.mkfifo(repo / ".memdir" / "config.toml")
    types = cli_json(_run(home, repo, "--json", "types"))
    assert isinstance(types, dict) and types["team"]["taxonomy"] == "memdir"
    doctor = json.loads(_run(home, repo, "--json", "doctor").stdout)
    assert [(p["kind"], p["where"]) for p in doctor] == [
        ("config", str(repo / ".memdir" / "config.toml"))]
    assert doctor[0]["hint"] == "remove it or replace it with a regular file"
