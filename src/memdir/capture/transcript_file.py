"""Reading a transcript file as hostile data: opened without following a symlink, regular
files only, the agent's format checked from the first lines, then read line by line from a
byte offset in bounded memory and bounded time.

Invariants:
- :func:`open_transcript` never follows a symlink in the last path component and never
  blocks: the file is opened ``O_NOFOLLOW | O_NONBLOCK`` and ``fstat`` of the open
  descriptor must say "regular file" (a directory, a FIFO, a device such as /dev/zero is
  refused at once; nothing can be swapped between the check and the read).
- Memory is bounded whatever the file's size or shape: bytes are read in ``CHUNK`` pieces
  and a line longer than ``MAX_LINE`` bytes is skipped (counted) without being held whole.
- A window (:func:`read_window`) holds only complete lines ("\\n"-terminated): the line the
  agent is still writing is left for the next read, so a saved end offset always falls on
  the start of a line. A window is at most ``budget`` bytes, taken from the end of the file;
  what lies between the start asked for and the window is left unread and reported.
- Reading stops at ``deadline`` (``time.monotonic()``): what was read so far is returned and
  marked incomplete, so a caller never overruns its own time limit.
- :func:`agent_format` looks only at the first ``SNIFF_LINES`` non-blank lines: a file is
  an agent transcript when one of them is a Claude Code or Codex line. Plain text, a JSON
  message list, /etc/shadow and binary garbage are not.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from memdir.capture.transcript import FORMATS_HINT, Source, Transcript
from memdir.core.errors import InvalidMemoryError

__all__ = ["AGENT_SOURCES", "CHUNK", "MAX_LINE", "SNIFF_LINES", "Window", "agent_format",
           "iter_lines", "open_transcript", "read_window"]

CHUNK = 1 << 20  # bytes read at a time
MAX_LINE = 8 << 20  # a longer line (a pasted image, say) is skipped unread
SNIFF_LINES = 10
SNIFF_BYTES = 32 << 20  # the first lines are looked for within this many bytes
AGENT_SOURCES: tuple[Source, ...] = ("claude-code", "codex")
NOT_AGENT_HINT = ("hooks read only the agent's own session files (Claude Code or Codex "
                  "JSON lines); to capture from another file, run memdir extract "
                  "--transcript FILE (add --format text for plain text)")


@dataclass(frozen=True)
class Window:
    """What :func:`read_window` read: the messages of the complete lines between ``start``
    and ``end`` (byte offsets), and how much of the file it left unread before ``start``."""

    transcript: Transcript
    start: int
    end: int
    size: int  # the file's size when it was opened
    unread: int = 0  # bytes between the offset asked for and ``start``, skipped (budget)
    long_lines: int = 0  # lines over MAX_LINE, skipped unread
    complete: bool = True  # False: the deadline stopped the read before the file's end
    restarted: bool = False  # the offset asked for was not a line start: read from 0


def open_transcript(path: str | os.PathLike[str]) -> BinaryIO:
    """The file at ``path`` opened for reading, if it is a regular file reached without a
    symlink; else :class:`InvalidMemoryError` saying what it is."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    name = os.fspath(path)
    try:
        if not hasattr(os, "O_NOFOLLOW") and os.path.islink(name):  # Windows: no O_NOFOLLOW
            raise OSError(errno.ELOOP, "is a symlink")
        fd = os.open(name, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidMemoryError(f"transcript {name} is a symlink; memdir does not follow "
                                     "links it did not create",
                                     "pass the path of the file itself") from None
        if exc.errno == errno.ENOENT:
            raise InvalidMemoryError(f"no transcript at {name!r}", FORMATS_HINT) from None
        raise InvalidMemoryError(f"cannot read transcript {name}: {exc.strerror or exc}",
                                 FORMATS_HINT) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else "a pipe" if stat.S_ISFIFO(mode) \
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" \
                if stat.S_ISSOCK(mode) else "not a regular file"
            raise InvalidMemoryError(f"transcript {name} is {what}, not a file",
                                     FORMATS_HINT)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _size(fh: BinaryIO) -> int:
    return os.fstat(fh.fileno()).st_size


def iter_lines(fh: BinaryIO, start: int, end: int, *, max_line: int = MAX_LINE,
               deadline: float | None = None, last_partial: bool = False,
               ) -> Iterator[tuple[int, bytes | None]]:
    """``(offset after the line, its bytes)`` for each line in ``[start, end)``, read in
    ``CHUNK`` pieces; an over-long line comes as ``None``, never held. The unterminated last
    piece is a line only with ``last_partial``. Stops quietly at ``deadline``."""
    fh.seek(start)
    pos = start  # file offset of buf[0]
    buf = b""
    skipping = False  # inside an over-long line: drop bytes until its "\n"
    while pos + len(buf) < end:
        if deadline is not None and time.monotonic() > deadline:
            return
        chunk = fh.read(min(CHUNK, end - pos - len(buf)))
        if not chunk:
            break  # the file shrank under us
        buf += chunk
        at = 0
        while (nl := buf.find(b"\n", at)) >= 0:
            line = None if skipping or nl - at > max_line else buf[at:nl]
            skipping = False
            yield pos + nl + 1, line
            at = nl + 1
        pos, buf = pos + at, buf[at:]
        if len(buf) > max_line:  # no end in sight: forget it, remember only to skip it
            skipping, pos, buf = True, pos + len(buf), b""
    if last_partial and (buf or skipping):
        yield pos + len(buf), None if skipping else buf


def _decode(line: bytes) -> str:
    return line.decode("utf-8", errors="replace").removeprefix("\ufeff").replace(
        "\x00", "\ufffd").rstrip("\r")


def agent_format(fh: BinaryIO, deadline: float | None = None) -> Transcript | None:
    """The agent format of the file (a Transcript of its first lines, whose ``source`` and
    ``session_id`` are the file's), or None when it is not a Claude Code or Codex file."""
    from memdir.capture.transcript_formats import line_source, parse_lines

    seen: list[str] = []
    size = _size(fh)
    for _, raw in iter_lines(fh, 0, min(size, SNIFF_BYTES), deadline=deadline,
                             last_partial=size <= SNIFF_BYTES):
        if raw is None or not raw.strip():
            continue
        seen.append(_decode(raw))
        if line_source(seen[-1]) in AGENT_SOURCES:
            first = parse_lines(seen)
            return first if first.source in AGENT_SOURCES else None
        if len(seen) >= SNIFF_LINES:
            break
    return None


def _line_start(fh: BinaryIO, offset: int) -> bool:
    """Whether ``offset`` is the start of a line (0, or just after a "\\n")."""
    if offset == 0:
        return True
    fh.seek(offset - 1)
    return fh.read(1) == b"\n"


def read_window(fh: BinaryIO, *, start: int = 0, first_index: int = 0, budget: int,
                deadline: float | None = None, source: Source = "claude-code",
                skip_index: int | None = None) -> Window:
    """The messages of the complete lines after byte ``start`` (a line start; anything else
    reads from 0), at most the last ``budget`` bytes of them, numbered from ``first_index``
    (from ``skip_index``, when given, if bytes before the window are left unread)."""
    from memdir.capture.transcript_formats import parse_lines

    size = _size(fh)
    restarted = start < 0 or start > size or not _line_start(fh, start)
    if restarted:  # the file was replaced or cut: the offset means nothing
        start, first_index = 0, 0
    begin = max(start, size - budget)
    long_lines = 0
    end = begin
    lines = iter_lines(fh, begin, size, deadline=deadline)
    if begin > start and not _line_start(fh, begin):
        # the window starts mid-line: that line is not whole, drop it
        end = next(lines, (end, None))[0]

    def decoded() -> Iterator[str]:
        nonlocal end, long_lines
        for offset, raw in lines:
            end = offset
            if raw is None:
                long_lines += 1
            else:
                yield _decode(raw)

    if begin > start and skip_index is not None:
        first_index = skip_index
    transcript = parse_lines(decoded(), first_index=first_index, source=source)
    if long_lines:
        from dataclasses import replace

        transcript = replace(transcript, skipped=transcript.skipped + long_lines)
    complete = end >= size or not _more_lines(fh, end, size)
    return Window(transcript, begin, end, size, begin - start, long_lines, complete, restarted)


def _more_lines(fh: BinaryIO, end: int, size: int) -> bool:
    """Whether a complete line lies after ``end`` (i.e. the read stopped early)."""
    fh.seek(end)
    return b"\n" in fh.read(min(size - end, CHUNK))
