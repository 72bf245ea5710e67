"""Text shortened to fit a limit: cut between words and marked, never inside a word.

Every place memdir shortens stored text that an agent or a person reads (context and snippet
lines, MEMORY.md entries, recall's 4 KB cut) goes through here, so no line ends in a
fragment such as ``Deployments go thr…``.

Invariants:
- Text that fits is returned as it is; otherwise the result is a prefix of the text, with
  trailing spaces and separators (``,;:`` dashes, opening brackets) dropped, then the mark,
  and it fits the limit (characters for :func:`shorten`, UTF-8 bytes for
  :func:`shorten_bytes`).
- The cut falls at whitespace when there is some in the last half of the room, else after
  other punctuation there (inside a URL or a path), else, for one token longer than half the
  room (a hash, a long identifier), inside it: a prefix of half the room says more than none.
"""

from __future__ import annotations

__all__ = ["ELLIPSIS", "shorten", "shorten_bytes"]

ELLIPSIS = "\u2026"  # …
_TRAILING = " \t\n\r,;:([{<\u2013\u2014-/"  # dropped before the mark: they lead to nothing


def shorten(text: str, limit: int, mark: str = ELLIPSIS) -> str:
    """``text`` if it has at most ``limit`` characters, else its longest prefix that ends
    between two words, followed by ``mark``, in ``limit`` characters at most."""
    if len(text) <= limit:
        return text
    room = limit - len(mark)
    if room <= 0:
        return mark[:max(limit, 0)]
    return _prefix(text, room) + mark


def shorten_bytes(text: str, limit: int, mark: str) -> str:
    """``text`` if its UTF-8 form has at most ``limit`` bytes, else its longest prefix that
    ends between two words followed by ``mark`` (``mark`` included in the ``limit``)."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    room = limit - len(mark.encode("utf-8"))
    if room <= 0:
        return ""
    # The characters whose bytes fit: a multi-byte character cut in half is left out.
    chars = len(raw[:room].decode("utf-8", errors="ignore"))
    return _prefix(text, chars) + mark


def _prefix(text: str, room: int) -> str:
    """The longest prefix of ``text[:room]`` that ends between words (see the invariants);
    ``text`` is longer than ``room``."""
    head = text[:room]
    if not (_word(head[-1:]) and _word(text[room])):  # the cut already falls between words
        return _trim(head) or head
    floor = room // 2
    space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    if space >= floor:
        return _trim(head[:space]) or head
    for at in range(room - 1, floor - 1, -1):  # after other punctuation: a URL, a path
        if not _word(head[at]):
            return _trim(head[:at + 1]) or head
    return head  # one token longer than half the room: cut inside it


def _word(char: str) -> bool:
    """Part of a word: letters, digits, ``_`` and the apostrophe of "don't"."""
    return char.isalnum() or char in "_'\u2019"


def _trim(head: str) -> str:
    return head.rstrip(_TRAILING)
