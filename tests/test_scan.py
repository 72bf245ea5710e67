"""The directory scan every command runs: the C version (memdir._scan, built by setup.py)
gives exactly what the Python loop gives, for every kind of entry a memory folder can hold."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memdir import files

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX directory calls")


def _python_scan(directory: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[int, int]]:
    with monkeypatch.context() as patch:
        patch.setattr(files, "native", None)
        return files.scan_dir(directory)


def test_the_extension_is_built_here() -> None:
    # Where there is a C compiler (this machine, CI) the install builds it; without it every
    # command would quietly take the slower Python loop.
    from memdir import _scan

    assert files.native is _scan


def test_c_and_python_scans_agree_on_every_kind_of_entry(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "memories"
    folder.mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("x" * 7)
    (folder / "fact_plain.md").write_text("hello")
    (folder / "fact_café-日本.md").write_text("unicode name")
    (folder / "empty.md").write_text("")
    (folder / "MEMORY.md").write_text("the index, never a memory")
    (folder / ".fact_hidden.md").write_text("a temp file")
    (folder / "notes.txt").write_text("not markdown")
    (folder / ".md").write_text("only a suffix")
    (folder / "dir.md").mkdir()
    (folder / "link.md").symlink_to(outside)
    (folder / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    os.mkfifo(folder / "fifo.md")
    os.utime(folder / "fact_plain.md", ns=(1, 1_700_000_000_123_456_789))
    bad = os.fsencode(folder) + b"/fact_\xff\xfe.md"  # not UTF-8: skipped, doctor reports it
    with open(bad, "wb") as fh:
        fh.write(b"latin-1 name")
    got = files.scan_dir(folder)
    assert got == _python_scan(folder, monkeypatch)
    assert sorted(got) == ["empty.md", "fact_café-日本.md", "fact_plain.md", "link.md"]
    assert got["fact_plain.md"] == (1_700_000_000_123_456_789, 5)
    assert got["link.md"][1] == 7  # a symlink is followed (the caller vets where it leads)


def test_a_large_folder_and_a_missing_one(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(3000):
        (folder / f"fact_{n}.md").write_text("x" * (n % 17))
    got = files.scan_dir(folder)
    assert len(got) == 3000 and got == _python_scan(folder, monkeypatch)
    assert files.scan_dir(tmp_path / "missing") == {}
    (tmp_path / "file.md").write_text("not a folder")
    assert files.scan_dir(tmp_path / "file.md") == {}


def test_the_callers_descriptor_stays_open_and_unmoved(tmp_path: Path) -> None:
    from memdir import _scan

    (tmp_path / "a.md").write_text("a")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        first = _scan.scan(fd)
        assert _scan.scan(fd) == first == {"a.md": first["a.md"]}
        os.fstat(fd)  # still open
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        _scan.scan(fd)  # closed now
    with pytest.raises(ValueError):
        _scan.scan(-1)


def test_c_and_python_name_checksums_agree(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The fingerprint's names checksum (count, sum of CRC-32s) of what a listing shows: C and
    # Python must agree bit for bit, since either may have saved the fingerprint.
    from memdir import fingerprint

    folder = tmp_path / "names"
    folder.mkdir()
    for name in ("fact_a.md", "fact_é-日本.md", "emoji_😀.md", "MEMORY.md", ".tmp.md", "x.txt"):
        (folder / name).write_text("x")
    (folder / "dir.md").mkdir()  # counted: the listing does not look at kinds
    raw = os.fsencode(folder)
    for bad in (b"fact_\xff.md", b"over_\xc0\xaf.md", b"surrogate_\xed\xa0\x80.md",
                b"big_\xf4\x90\x80\x80.md", b"cut_\xe6\x97.md"):
        with open(raw + b"/" + bad, "wb") as fh:  # none of these is UTF-8: none is counted
            fh.write(b"x")
    got = fingerprint._listed(folder)
    with monkeypatch.context() as patch:
        patch.setattr(files, "native", None)
        assert fingerprint._listed(folder) == got
    names = ["fact_a.md", "fact_é-日本.md", "emoji_😀.md", "dir.md"]
    assert got == (4, fingerprint.names_sum(names))
