"""The directory scan every command runs: the C version (memdir._scan, built by setup.py)
gives exactly what the Python loop gives, for every kind of entry a memory folder can hold."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memdir.core import files

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
    # A symlink is never followed, even to a regular file: skipped like the FIFO (doctor
    # reports both).
    assert sorted(got) == ["empty.md", "fact_café-日本.md", "fact_plain.md"]
    assert got["fact_plain.md"] == (1_700_000_000_123_456_789, 5)


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
    from memdir.core import fingerprint

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


def _every_kind(folder: Path, outside: Path, count: int = 0) -> None:
    folder.mkdir()
    outside.write_text("x" * 7)
    for name, text in (("fact_plain.md", "hello"), ("fact_café-日本.md", "unicode"),
                       ("empty.md", ""), ("MEMORY.md", "index"), (".fact_hidden.md", "tmp"),
                       ("notes.txt", "no"), (".md", "suffix")):
        (folder / name).write_text(text)
    (folder / "dir.md").mkdir()
    (folder / "link.md").symlink_to(outside)
    (folder / "dangling.md").symlink_to(outside.parent / "nowhere.md")
    os.mkfifo(folder / "fifo.md")
    os.utime(folder / "fact_plain.md", ns=(1, 1_700_000_000_123_456_789))
    os.utime(folder / "empty.md", ns=(1, -5_000_000_123))  # before 1970: a negative mtime
    with open(os.fsencode(folder) + b"/fact_\xff\xfe.md", "wb") as fh:
        fh.write(b"not UTF-8")
    for n in range(count):  # enough files for the C side to split the stat calls
        (folder / f"fact_{n}.md").write_text("y" * (n % 23))


@pytest.mark.parametrize("count", [0, 2000])
def test_the_probe_is_the_scans_fingerprint_and_names(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      count: int) -> None:
    # Reconcile trusts a probe (no listing built) where the C part is built, and compares a
    # scan where it is not: both must give the same fingerprint and names checksum, bit for
    # bit, or every command would compare all rows again after switching.
    from memdir.core import fingerprint

    folder = tmp_path / "memories"
    _every_kind(folder, tmp_path / "outside.md", count)
    probed = fingerprint.probe(folder)
    with monkeypatch.context() as patch:
        patch.setattr(files, "native", None)
        assert fingerprint.probe(folder) is None  # no C part: reconcile scans
        scanned, disk = fingerprint.scan(folder)
    assert probed == (scanned, fingerprint.names_sum(disk))
    assert len(disk) == 3 + count  # the symlink is skipped by both, like the FIFO
    assert fingerprint.probe(tmp_path / "missing") is None


def test_a_probe_sees_an_edit_in_place_a_rename_and_a_new_file(tmp_path: Path) -> None:
    from memdir.core import fingerprint

    folder = tmp_path / "m"
    folder.mkdir()
    for n in range(600):
        (folder / f"fact_{n}.md").write_text("z" * 10)
    seen = {fingerprint.probe(folder)}
    with open(folder / "fact_599.md", "r+") as fh:  # same size, new mtime: edited in place
        fh.write("Z")
    os.utime(folder / "fact_599.md", ns=(1, 42))
    seen.add(fingerprint.probe(folder))
    (folder / "fact_0.md").rename(folder / "fact_renamed.md")
    seen.add(fingerprint.probe(folder))
    (folder / "fact_new.md").write_text("new")
    seen.add(fingerprint.probe(folder))
    assert len(seen) == 4


def test_a_store_reconciles_the_same_without_the_c_part(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The whole read path without memdir._scan: hand edits and deletions are still seen.
    from memdir import Memdir

    monkeypatch.setattr(files, "native", None)
    project = tmp_path / "project"
    project.mkdir()
    with Memdir(home=tmp_path / "home", project=project, semantic=False) as md:
        # Not weekday names: a memory's created day is searchable as words (its weekday too).
        kept = md.store("the staging database is refreshed every weekend", type="fact")
        gone = md.store("deploys go out from the release branch", type="fact")
        assert kept.path is not None and gone.path is not None
    kept.path.write_text(kept.path.read_text().replace("weekend", "evening"))
    gone.path.unlink()
    with Memdir(home=tmp_path / "home", project=project, semantic=False) as md:
        assert [h.memory.id for h in md.search("evening")] == [kept.id]
        assert md.search("weekend") == [] and md.search("release branch") == []
