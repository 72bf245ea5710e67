"""Watching memory directories for changes, so that a long-lived process (the warm daemon)
reconciles only when something there changed, instead of listing and statting every file of
every directory before each request (about 15 ms per 10,000 memories).

On Linux, inotify (through ``ctypes``, no extension): one watch per directory for files made,
removed, renamed, written or changed in their metadata, and for the directory itself going
away. Elsewhere, or when inotify cannot be used (no watches left, a directory that does not
exist yet, a file system that does not report), :meth:`DirWatch.quiet` is always False and the
caller reconciles as before.

Invariants:
- ``quiet()`` True means: no event arrived since the previous ``quiet()`` that returned, and
  every directory was watched the whole time. So a caller that reconciles whenever it is False
  misses nothing: an event that arrives while it reconciles is still pending for the next call.
- A directory that does not exist yet is watched through its nearest existing parent, so
  that its coming into being is an event too; after any event the watches are set up again
  (a few system calls), deeper where the directory now exists.
- A watch that ends (the directory removed or renamed, the event queue overflowed) makes the
  next ``quiet()`` False. So does the first call: nothing has been reconciled under the watch.
- It never raises: a failure only costs the reconcile it would have saved.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["DirWatch"]

# <sys/inotify.h>
_IN_MODIFY, _IN_ATTRIB, _IN_CLOSE_WRITE = 0x2, 0x4, 0x8
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_IN_NONBLOCK, _IN_CLOEXEC = 0o4000, 0o2000000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO
         | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class DirWatch:
    """Change events for a set of directories (see the module docstring)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = [str(p) for p in paths]
        self._fd = -1
        self._libc: object = None
        self._whole = False  # every directory (or its nearest parent) has a watch
        self._fresh = True  # no reconcile under the watch yet
        if sys.platform == "linux":
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
            except (OSError, AttributeError):
                return
            if fd >= 0:
                self._fd, self._libc = fd, libc
                self._watch()

    @property
    def active(self) -> bool:
        """Whether changes are reported (else ``quiet()`` is always False)."""
        return self._fd >= 0

    def _watch(self) -> None:
        whole = True
        for path in self._paths:
            while not os.path.isdir(path) and os.path.dirname(path) != path:
                path = os.path.dirname(path)  # not there yet: its coming is an event above
            wd = self._libc.inotify_add_watch(  # type: ignore[attr-defined]
                self._fd, os.fsencode(path), _MASK)
            whole = whole and wd >= 0  # no watch (none left, no permission): no quiet
        self._whole = whole

    def quiet(self) -> bool:
        """True when nothing changed in the directories since the last call that returned."""
        if self._fd < 0:
            return False
        events, self._fresh = self._fresh, False
        rewatch = not self._whole
        try:
            while True:
                data = os.read(self._fd, 65536)
                if not data:
                    break
                events = True
                at = 0
                while at + _EVENT.size <= len(data):
                    _wd, mask, _cookie, size = _EVENT.unpack_from(data, at)
                    rewatch = rewatch or bool(mask & (_IN_IGNORED | _IN_Q_OVERFLOW
                                                      | _IN_DELETE_SELF | _IN_MOVE_SELF))
                    at += _EVENT.size + size
        except BlockingIOError:
            pass
        except OSError:
            self.close()
            return False
        if rewatch or events:
            self._watch()
        return not events and not rewatch

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
