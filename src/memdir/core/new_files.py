"""Creating new files: each complete before it has a name, never over anything already there.

Invariants:
- A new file gets its name by a hard link (``linkat``), which fails on anything at the name,
  a symlink or a dangling one included: FileExistsError, and nothing written.
- On Linux the file has no name at all until then (``O_TMPFILE``): a process killed
  mid-write leaves nothing behind. Elsewhere, or on a filesystem without it, a temp file named
  ``.<name>.<pid>.<random>.tmp`` (a dotfile, which no scan takes for a memory) is linked and
  removed.
- :class:`NewFiles` opens its directory once, so a batch does not resolve the directory's
  path for every file.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from memdir.core.journal import before_write

__all__ = ["NewFiles", "fill"]


def fill(fd: int, data: bytes, fsync: bool) -> os.stat_result:
    """Write all of ``data`` to a new file's descriptor and return its stat (not closed)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    if fsync:
        os.fsync(fd)
    return os.fstat(fd)


# Linux can create a file without a name (O_TMPFILE) and link it in once complete: a kill
# mid-write leaves nothing behind, and a new file costs one directory change instead of three
# (create a temp name, link, unlink), a third of the time. Elsewhere, or on a filesystem
# without it, a named temp file is linked instead.
_TMPFILE = getattr(os, "O_TMPFILE", 0)
# What linkat() through /proc gives where that cannot work (no /proc mounted, a filesystem
# that refuses it): the named way is used instead. A full disk or a missing directory is
# raised as is.
_NO_LINK = {errno.ENOENT, errno.EXDEV, errno.EPERM, errno.EACCES, errno.EOPNOTSUPP,
            errno.EINVAL}


class NewFiles:
    """Creates new files in one directory, each complete before it has a name and never over
    anything already there. Opens the directory once, so a batch does not resolve its path
    for every file."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        self.unnamed = bool(_TMPFILE)  # O_TMPFILE still worth trying here

    def __enter__(self) -> NewFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def create(self, name: str, data: bytes, *, fsync: bool = False) -> os.stat_result:
        """A new file ``name`` holding ``data``, and its stat. FileExistsError (and nothing
        written) if anything has that name, a symlink included; ``name`` is one component."""
        before_write(self.directory / name, data)  # a consolidation plan journals it first
        if self.unnamed:
            try:
                fd = os.open(".", _TMPFILE | os.O_WRONLY, 0o644, dir_fd=self.fd)
            except OSError:  # the filesystem (or kernel) has no O_TMPFILE
                self.unnamed = False
            else:
                try:
                    st = fill(fd, data, fsync)
                    # The source dir fd only makes Python call linkat(), which can follow the
                    # /proc link to the open file; the path is absolute, so it is not used.
                    os.link(f"/proc/self/fd/{fd}", name, src_dir_fd=self.fd,
                            dst_dir_fd=self.fd, follow_symlinks=True)
                    return st
                except FileExistsError:
                    raise
                except OSError as error:
                    if error.errno not in _NO_LINK:
                        raise
                    self.unnamed = False  # no /proc here: the named way below
                finally:
                    os.close(fd)
        return self._create_named(name, data, fsync)

    def _create_named(self, name: str, data: bytes, fsync: bool) -> os.stat_result:
        tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=self.fd)
        try:
            try:
                st = fill(fd, data, fsync)
            finally:
                os.close(fd)
            _place_new(self.fd, tmp, name, self.directory)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
        return st


def _place_new(dir_fd: int, tmp: str, name: str, directory: Path) -> None:
    """Give ``tmp`` the name ``name`` unless something has it: a hard link fails atomically
    on an existing name (``os.replace`` would overwrite another program's new file)."""
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:  # no hard links here (some FUSE and network filesystems): check, then move
        if os.path.lexists(directory / name):
            raise FileExistsError(17, "File exists", str(directory / name)) from None
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
