"""Text as a lenient reader decodes it, each character traced back to where it came from.

A model reads ``&lt;/system&gt;``, ``\\u003c/system>``, ``%253C/system%253E`` or
``＜ⓢⓨⓢⓣⓔⓜ＞`` as the tag they spell. :func:`decoded` gives the text such a reader sees:

1. each character NFKC-normalised on its own (full-width ``＜`` ``｜`` ``／`` and letters,
   circled ``ⓢ``, small ``﹤``, ... become ASCII), format characters dropped (and, in the
   second of the two readings of a text with combining marks, the marks too);
2. then a round of the common escapes, each decoded (and NFKC-normalised) on its own: HTML
   entities (``&lt;`` ``&#60;`` ``&#x3c;``, ``lt``/``gt`` without ``;``, a few named ones,
   also double-encoded ``&amp;lt;``), JSON/JS/Python escapes (``\\u003c`` ``\\u{3c}``
   ``\\U0000003c`` ``\\x3c`` ``\\x{3c}``, three-digit octal ``\\074``, ``\\/``) and URL
   percent-encoding (``%3C``, its double encoding ``%253C``, UTF-8 sequences);
3. then a second round, for what the first decoded into another escape (``%26lt;`` ->
   ``&lt;``, ``\\u0026#60;`` -> ``&#60;``, ``%25253C`` -> ``%3C``): no further.

:class:`Decoded` maps every character of the decoded text back to the span of the original
it came from, so a caller can find something in the decoded text and change the original
there. ``\\\\`` is not read as an escape (``\\\\u003c`` decodes to ``\\<``: the safe reading
for text whose escaping is unknown). Decoding is for reading only: nothing here rewrites text.

Cost: text holding none of ``& \\ %`` and already NFKC-normal decodes to itself with no
scan beyond two C-speed checks; otherwise one regex pass (a second over non-ASCII characters
when the text is not NFKC-normal).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property

__all__ = ["COMBINING_MARKS", "Decoded", "decoded", "has_marks"]

# Named entities a reader may decode into a tag's pieces (others stay as written; the tag
# rule treats any entity after a bracket as tag-like). Looked up lower-cased.
_NAMED = {
    "lt": "<", "gt": ">", "sol": "/", "bsol": "\\", "verbar": "|", "vert": "|",
    "verticalline": "|", "lsaquo": "\u2039", "rsaquo": "\u203a", "lang": "\u27e8",
    "rang": "\u27e9", "langle": "\u27e8", "rangle": "\u27e9", "leftanglebracket": "\u27e8",
    "rightanglebracket": "\u27e9", "excl": "!", "quest": "?", "colon": ":", "lowbar": "_",
    "underbar": "_", "nbsp": "\u00a0", "tab": "\t", "newline": "\n", "num": "#",
    "percnt": "%", "semi": ";", "equals": "=",
}
_BYTE = r"%(?:25)?"  # a percent-encoded byte, or its double encoding (%253C -> %3C -> <)
_ESCAPES = (  # behind a one-character lookahead: re then skips to candidates at C speed
    r"(?=[&\\%])(?:&(?:amp;)*(?:\#0*(?P<dec>[0-9]{1,7});?|\#x0*(?P<hex>[0-9a-f]{1,6});?"
    r"|(?P<name>(?:" + "|".join(sorted(_NAMED, key=len, reverse=True)) + ");|lt|gt))"
    r"|\\(?:(?-i:U)(?P<u8>[0-9a-f]{8})|(?-i:u)(?P<u4>[0-9a-f]{4})"
    r"|(?-i:u)\{0*(?P<ub>[0-9a-f]{1,6})\}|x(?P<x2>[0-9a-f]{2})|x\{0*(?P<xb>[0-9a-f]{1,6})\}"
    r"|(?-i:u0*|U0*)(?P<short>[0-9a-f]{1,7})(?![0-9a-f])|(?P<oct>[0-3][0-7]{2})|(?P<sl>/))"
    rf"|(?P<utf>{_BYTE}(?:[c-d][0-9a-f]{_BYTE}[89ab][0-9a-f]"
    rf"|e[0-9a-f](?:{_BYTE}[89ab][0-9a-f]){{2}}|f[0-4](?:{_BYTE}[89ab][0-9a-f]){{3}}))"
    rf"|{_BYTE}(?P<pct>[0-7][0-9a-f]))"
)
_WIDE = re.compile("[^\x00-\x7f]+")
# The combining marks a reader's eye passes over (also what neutralise skips after a bracket),
# as the ranges of a regex character class.
COMBINING_MARKS = ("\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe00-\ufe0f"
                   "\ufe20-\ufe2f")
_COMBINING = re.compile(f"[{COMBINING_MARKS}]")
_ROUNDS = 2
_STARTS = re.compile(r"[&\\%]")
_LONGEST = 12  # characters an escape may hold before its last one ("\\u{0000003c}")
# Dropped from the decoded text: format and control characters, and combining marks (a mark
# on a backslash, "\\\u0338u003c", hides the escape from no reader).
_DROPPED = ("Cf", "Cc", "Mn", "Me")
_FORMAT = ("Cf", "Cc")


@cache
def _escapes() -> re.Pattern[str]:
    return re.compile(_ESCAPES, re.IGNORECASE)


@dataclass(frozen=True)
class Decoded:
    """The decoded ``text`` and, for each piece that decoding changed, where it is:
    ``(start in text, length in text, start in the original, end in the original)``, sorted.
    Characters outside those pieces are the original's, shifted. ``inner`` is the stage this
    one decoded (None: this one decoded the original itself)."""

    text: str
    pieces: tuple[tuple[int, int, int, int], ...] = ()
    inner: Decoded | None = None

    def source(self, index: int) -> tuple[int, int]:
        """The span of the original text that the character at ``index`` came from."""
        start, end = self._own(index)
        if self.inner is None:
            return start, end
        return self.inner.source(start)[0], self.inner.source(end - 1)[1]

    @cached_property
    def _starts(self) -> list[int]:
        return [piece[0] for piece in self.pieces]

    def _own(self, index: int) -> tuple[int, int]:
        k = bisect_right(self._starts, index) - 1
        if k < 0:
            return index, index + 1
        at, length, source_start, source_end = self.pieces[k]
        if index < at + length:
            return source_start, source_end
        position = source_end + index - at - length
        return position, position + 1


def _visible(value: str, dropped: tuple[str, ...] = _DROPPED) -> str:
    """A decoded character as a reader sees it: NFKC-normalised, the characters of the
    ``dropped`` categories left out."""
    value = unicodedata.normalize("NFKC", value)
    if value.isascii() and value.isprintable():
        return value
    return "".join(c for c in value if c in "\t\n" or unicodedata.category(c) not in dropped)


def _wide(text: str, dropped: tuple[str, ...]) -> Decoded | None:
    """The first stage: each non-ASCII character as :func:`_visible` makes it, looked at
    one by one only in runs that are not NFKC-normal or hold a combining mark."""
    out: list[str] = []
    pieces: list[tuple[int, int, int, int]] = []
    last = length = 0
    for run in _WIDE.finditer(text):
        chunk = run.group(0)
        if unicodedata.is_normalized("NFKC", chunk) and not _COMBINING.search(chunk):
            continue
        for at, char in enumerate(chunk, run.start()):
            seen = _visible(char, dropped)
            if seen == char:
                continue
            out.append(text[last:at])
            length += at - last
            pieces.append((length, len(seen), at, at + 1))
            out.append(seen)
            length += len(seen)
            last = at + 1
    if not pieces:
        return None
    out.append(text[last:])
    return Decoded("".join(out), tuple(pieces))


def _value(match: re.Match[str]) -> str | None:
    """What an escape decodes to (None: nothing a reader would decode)."""
    g = match.groupdict()
    if g["name"] is not None:
        return _NAMED.get(g["name"].rstrip(";").lower())
    if g["sl"] is not None:
        return "/"
    if g["utf"] is not None:
        raw = bytes.fromhex(re.sub("%(?:25)?", "", g["utf"]))
        return _visible(raw.decode("utf-8", errors="replace"))
    for name, base in (("dec", 10), ("hex", 16), ("u4", 16), ("ub", 16), ("u8", 16),
                       ("x2", 16), ("xb", 16), ("short", 16), ("oct", 8), ("pct", 16)):
        if g[name] is not None:
            code = int(g[name], base)
            return _visible(chr(code)) if code < 0x110000 and not 0xD800 <= code < 0xE000 \
                else None
    return None  # pragma: no cover - every alternative has a group


def _stage(text: str, pattern: re.Pattern[str], value: Callable[[re.Match[str]], str | None],
           inner: Decoded | None) -> tuple[Decoded | None, bool]:
    """One stage of decoding ``text`` (the text of ``inner``, or the original): the new
    stage (``inner`` when nothing changed), and whether another round may decode more."""
    out: list[str] = []
    pieces: list[tuple[int, int, int, int]] = []
    last = length = 0
    for match in pattern.finditer(text):
        decoded = value(match)
        if decoded is None or decoded == match.group(0):
            continue
        out.append(text[last:match.start()])
        length += match.start() - last
        pieces.append((length, len(decoded), match.start(), match.end()))
        out.append(decoded)
        length += len(decoded)
        last = match.end()
    if not pieces:
        return inner, False
    out.append(text[last:])
    new = "".join(out)
    # Another round can decode more only where a piece decoded into an escape's start, or
    # ends one begun just before it ("\\" + "%2f", "%3" + "%43").
    again = any(_STARTS.search(new, max(0, at - _LONGEST), at + length)
                for at, length, _, _ in pieces)
    return Decoded(new, tuple(pieces), inner), again


def has_marks(text: str) -> bool:
    """Whether ``text`` holds a combining mark: then it has two readings (see
    :func:`decoded`)."""
    return not text.isascii() and _COMBINING.search(text) is not None


def decoded(text: str, *, drop_marks: bool = False) -> Decoded:
    """``text`` as a lenient reader decodes it (see the module docstring). Combining marks
    are kept (``&#x3c\u0338amp;`` reads ``<`` then ``amp;``), or with ``drop_marks`` left
    out first (``\\\u0338u003c`` reads ``<``): a caller that must see both asks for both."""
    view: Decoded | None = None
    if not text.isascii() and (not unicodedata.is_normalized("NFKC", text)
                               or (drop_marks and _COMBINING.search(text))):
        view = _wide(text, _DROPPED if drop_marks else _FORMAT)
    current = view.text if view else text
    for _ in range(_ROUNDS):
        if "&" not in current and "\\" not in current and "%" not in current:
            break
        view, again = _stage(current, _escapes(), _value, view)
        if not again:
            break  # the second round is only for what the first decoded into an escape
        current = view.text if view else text
    return view or Decoded(text)
