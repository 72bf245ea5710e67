"""A home that cannot be written (memdir.core.readonly): search, list, context, recall and the
agent's hooks still work, from the index when it is current and from the files otherwise;
writes fail with an error that says how to fix it; nothing in the home changes.

How the home is made read-only, faithfully: as a normal user, ``chmod -R a-w``. Tests run as
root here, where permissions do not stop a write, so the command runs instead in its own
user and mount namespace (``unshare -rm``) in which the home is bind-mounted read-only: every
write there fails with EROFS, exactly as on a read-only mount. The namespace ends with the
command; the test's own view of the home stays writable."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memdir import Memdir

_MOUNT = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'


def _can_mount_read_only(tmp: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp / "probe"
    probe.mkdir()
    done = subprocess.run(["unshare", "-rm", "sh", "-c", _MOUNT, str(probe), "sh", "-c",
                           f"! touch {probe}/x 2>/dev/null"], capture_output=True, timeout=30)
    probe.rmdir()
    return done.returncode == 0


def _snapshot(home: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(home)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(home.rglob("*"))}


class ReadOnly:
    """Runs `memdir` (or a hook) with the home read-only, in the repository."""

    def __init__(self, home: Path, repo: Path, tmp: Path) -> None:
        self.home, self.repo = home, repo
        self.as_root = os.geteuid() == 0
        if self.as_root and not _can_mount_read_only(tmp):
            pytest.skip("running as root without `unshare -rm` and bind mounts: no way to "
                        "make the home read-only here")

    def __call__(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "memdir", *args]
        env = {**os.environ, "MEMDIR_HOME": str(self.home)}
        if self.as_root:
            command = ["unshare", "-rm", "sh", "-c", _MOUNT, str(self.home), *command]
            return subprocess.run(command, cwd=self.repo, input=input, capture_output=True,
                                  text=True, timeout=60, env=env)
        modes = {p: p.stat().st_mode for p in [self.home, *self.home.rglob("*")]}
        for p in modes:
            p.chmod(modes[p] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            return subprocess.run(command, cwd=self.repo, input=input, capture_output=True,
                                  text=True, timeout=60, env=env)
        finally:
            for p, mode in modes.items():
                p.chmod(mode)


@pytest.fixture
def ro(home: Path, repo: Path, tmp_path: Path) -> ReadOnly:
    return ReadOnly(home, repo, tmp_path)


@pytest.fixture
def stored(home: Path, repo: Path) -> dict[str, str]:
    with Memdir(home=home, project=repo) as md:
        a = md.store("Deploys go out on Tuesdays after the billing freeze", type="project")
        b = md.store("Never force-push to main", type="policy")
    return {"deploy": a.id, "push": b.id}


def _notices(stderr: str) -> int:
    return stderr.count("cannot be written")


@pytest.mark.parametrize("fresh", [True, False])
def test_reads_work_from_a_read_only_home(ro: ReadOnly, home: Path, repo: Path,
                                          stored: dict[str, str], fresh: bool) -> None:
    if not fresh:  # a file added by hand since the index was written: the index is stale
        folder = next((home / "projects").iterdir())
        (folder / "fact_hand.md").write_text(
            "---\nname: Billing freeze\ndescription: the billing freeze starts on the 25th\n"
            "type: project\n---\nThe billing freeze starts on the 25th of each month.\n")
    before = _snapshot(home)
    search = ro("search", "billing freeze")
    assert search.returncode == 0, search.stderr
    assert stored["deploy"] in search.stdout
    assert ("fact_hand" in search.stdout) is not fresh
    assert _notices(search.stderr) == 1 and "hint" in search.stderr, search.stderr
    listing = ro("--json", "list")
    assert listing.returncode == 0, listing.stderr
    ids = {m["id"] for m in json.loads(listing.stdout)}
    assert {stored["deploy"], stored["push"]} <= ids
    context = ro("context")
    assert context.returncode == 0 and "force-push" in context.stdout, context.stderr
    recall = ro("recall", "--session", "s1", "when do deploys go out")
    assert recall.returncode == 0 and "Tuesdays" in recall.stdout, recall.stderr
    assert _snapshot(home) == before  # nothing written: no counters, no lock files


def test_reads_work_when_the_index_is_missing(ro: ReadOnly, home: Path,
                                              stored: dict[str, str]) -> None:
    (home / "index.sqlite").unlink()
    result = ro("search", "deploys tuesdays")
    assert result.returncode == 0, result.stderr
    assert stored["deploy"] in result.stdout
    assert not (home / "index.sqlite").exists()


def test_the_hooks_deliver_memory_from_a_read_only_home(ro: ReadOnly, home: Path, repo: Path,
                                                        stored: dict[str, str]) -> None:
    before = _snapshot(home)
    start = ro("hook", "session-start", input=json.dumps(
        {"session_id": "s1", "cwd": str(repo), "source": "startup"}))
    assert start.returncode == 0 and start.stderr == ""
    assert "force-push" in start.stdout
    prompt = ro("hook", "prompt", input=json.dumps(
        {"session_id": "s1", "cwd": str(repo), "prompt": "when do the deploys go out?"}))
    assert prompt.returncode == 0 and prompt.stderr == ""
    assert "Tuesdays" in prompt.stdout
    assert _snapshot(home) == before


def test_a_write_fails_with_a_clear_error_and_changes_nothing(ro: ReadOnly, home: Path,
                                                              stored: dict[str, str]) -> None:
    before = _snapshot(home)
    for args in (("store", "Releases are cut from main", "--type", "project"),
                 ("archive", stored["push"]), ("reindex",)):
        result = ro(*args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert "error: the memory home" in result.stderr and "cannot be written" in result.stderr
        assert "hint: make it writable" in result.stderr and "Traceback" not in result.stderr
    assert _snapshot(home) == before


def test_doctor_reports_the_read_only_home_and_get_counts_nothing(
        ro: ReadOnly, home: Path, stored: dict[str, str]) -> None:
    doctor = ro("--json", "doctor")
    problems = json.loads(doctor.stdout)
    found = [p for p in problems if p["kind"] == "read-only-home"]
    assert found and "chmod -R u+w" in found[0]["hint"], problems
    shown = ro("--json", "get", stored["deploy"])
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["access_count"] == 0

