"""Creating new files (:class:`memdir.core.new_files.NewFiles`, and ``atomic_write(exclusive=True)``
built on it): complete before named, never over anything, nothing left behind on failure,
the same on the Linux fast path (O_TMPFILE) and on the portable one (a named temp file)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memdir.core import new_files
from memdir.core.files import atomic_write
from memdir.core.new_files import NewFiles


@pytest.fixture
def there(tmp_path: Path) -> Path:
    """An empty directory of its own (the suite's fixtures put other things in tmp_path)."""
    path = tmp_path / "memories"
    path.mkdir()
    return path


@pytest.fixture(params=["unnamed", "named"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on the O_TMPFILE way and on the named-temp-file way."""
    if request.param == "named":
        monkeypatch.setattr(new_files, "_TMPFILE", 0)
    return str(request.param)


def test_a_new_file_holds_its_data_and_its_stat(there: Path, way: str) -> None:
    data = "---\ntype: fact\n---\nbody ünïcode\n".encode() * 500  # more than one write()
    with NewFiles(there) as folder:
        st = folder.create("fact_x.md", data)
        assert folder.unnamed is (way == "unnamed")
    target = there / "fact_x.md"
    assert target.read_bytes() == data
    now = target.stat()
    assert (st.st_size, st.st_mtime_ns, st.st_ino) == (now.st_size, now.st_mtime_ns, now.st_ino)
    assert now.st_mode & 0o777 == 0o644 & ~_umask()
    assert sorted(p.name for p in there.iterdir()) == ["fact_x.md"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("thing", ["file", "symlink", "dangling symlink", "directory"])
def test_nothing_that_has_the_name_is_replaced(tmp_path: Path, way: str, thing: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours")
    folder_path = tmp_path / "memories"
    folder_path.mkdir()
    target = folder_path / "fact_x.md"
    if thing == "file":
        target.write_text("another program's note")
    elif thing == "symlink":
        target.symlink_to(outside)
    elif thing == "dangling symlink":
        target.symlink_to(tmp_path / "nowhere.md")
    else:
        target.mkdir()
    with NewFiles(folder_path) as folder, pytest.raises(FileExistsError):
        folder.create("fact_x.md", b"mine")
    with pytest.raises(FileExistsError):
        atomic_write(target, "mine", exclusive=True)
    assert outside.read_text() == "not yours"
    assert not (tmp_path / "nowhere.md").exists()
    if thing == "file":
        assert target.read_text() == "another program's note"
    assert sorted(p.name for p in folder_path.iterdir()) == ["fact_x.md"]  # no temp file


def test_a_failed_write_leaves_no_file(there: Path, way: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.write

    def disk_full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full)
    with NewFiles(there) as folder, pytest.raises(OSError, match="No space"):
        folder.create("fact_x.md", b"data")
    monkeypatch.setattr(os, "write", real)
    assert list(there.iterdir()) == []


def test_without_proc_the_named_way_is_taken(there: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # A container without /proc mounted: linking the unnamed file fails with ENOENT.
    real = os.link

    def no_proc(src: str, dst: str, **kw: object) -> None:
        if str(src).startswith("/proc/"):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", src)
        real(src, dst, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "link", no_proc)
    with NewFiles(there) as folder:
        folder.create("a.md", b"one")
        assert not folder.unnamed
        folder.create("b.md", b"two")
        with pytest.raises(FileExistsError):
            folder.create("a.md", b"again")
    assert {p.name: p.read_bytes() for p in there.iterdir()} == {"a.md": b"one",
                                                                 "b.md": b"two"}


def test_a_removed_directory_is_an_error_on_either_way(there: Path, way: str) -> None:
    with NewFiles(there) as folder:
        os.rmdir(there)
        with pytest.raises(FileNotFoundError):
            folder.create("a.md", b"x")


_WRITER = """
import sys
from pathlib import Path
from memdir.core.new_files import NewFiles
data = b"x" * (1 << 20)
with NewFiles(Path(sys.argv[1])) as folder:
    print("ready", flush=True)
    n = 0
    while True:
        folder.create(f"f{n}.md", data)
        n += 1
"""


@pytest.mark.skipif(not hasattr(os, "O_TMPFILE"), reason="O_TMPFILE is Linux only")
def test_a_writer_killed_mid_write_leaves_only_complete_files(there: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", _WRITER, str(there)],
                          stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    names = [p.name for p in there.iterdir()]
    assert names, "the writer created nothing before the kill"
    assert all(not name.startswith(".") for name in names)  # no temp file on this way
    assert all((there / name).stat().st_size == 1 << 20 for name in names)
