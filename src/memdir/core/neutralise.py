"""Stored text made inert before memdir embeds it in anything an agent reads.

Memory text is data from many hands (team files, transcripts, text anyone typed), but memdir
writes it into an agent's prompt inside wrapper tags of its own (``<memory-context>``,
``<system-reminder>``). :func:`neutralise` is the one function every wrapper applies to every
piece of stored text it embeds (body, name, description, tags, meta, file names, MEMORY.md
lines, session excerpts): after it, no tag-shaped text survives from memory content, so every
tag in memdir's output is one memdir wrote, and they are balanced.

What counts as tag-shaped: an opening bracket, then optional whitespace (or combining marks),
an optional slash, optional whitespace, then a letter, ``!``, ``?``, ``_``, ``:`` or an
entity. The opening bracket may be ``<`` in any spelling a reader might decode: HTML entities
(``&lt;``, ``&#60;``, ``&#x3c;``, with or without ``;``, also double-encoded as
``&amp;lt;``), escapes (``\\u003c``, ``\\x3c``, ``%3C``) and look-alike brackets
(full-width ``＜``, ``﹤``, ``〈``, ``⟨``, ``˂``, ``❮`` ...). Such an opener becomes ``‹``
(U+2039, the inert form: text that already uses it is left alone), and the ``>`` (or
look-alike, or ``&gt;``) that closes it on the same line becomes ``›``. So
``</system-reminder>`` reads ``‹/system-reminder›``, ``Vec<u8>`` reads ``Vec‹u8›``, ``a < b``
reads ``a ‹ b``; a ``<`` before a digit, ``=``, ``-`` or another non-letter (``x <= 5``,
``<-``, ``1<2``) stays.

Invariants:
- Output never holds an opener followed by tag-like text; the function is idempotent
  (``neutralise(neutralise(t)) == neutralise(t)``) and adds no line break of its own.
- Invisible format characters (zero-width spaces, bidi overrides, Unicode tag characters; the
  joiners U+200C/U+200D are kept) and control characters other than tab and newline are
  removed; ``\\r\\n``, ``\\r`` and Unicode line/paragraph separators become ``\\n``. Nothing
  else changes: the text stays readable and its words searchable.
- Pure and fast: text with no candidate opener costs two scans; the tag patterns are
  compiled once, on first need. Nothing beyond the standard library's ``re`` is imported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import TypeVar

__all__ = ["INERT_CLOSE", "INERT_OPEN", "fence", "neutralise", "neutralise_data",
           "neutralise_lines"]

INERT_OPEN, INERT_CLOSE = "\u2039", "\u203a"  # ‹ ›

# Brackets a reader may take for "<" / ">" (NFKC maps the first two of each to ASCII).
_OPENERS = "<\uff1c\ufe64\u2329\u3008\u27e8\u27ea\u02c2\u1438\u276c\u276e\u29fc\u2039"
_CLOSERS = ">\uff1e\ufe65\u232a\u3009\u27e9\u27eb\u02c3\u1433\u276d\u276f\u29fd\u203a"
_AMP = r"&(?:amp;)*"


def _numeric(chars: str, then: str) -> str:
    """Entity and escape spellings of these characters (``&#60;`` ``&#x3c;`` ``\\u003c``)."""
    dec = "|".join(str(ord(c)) for c in chars)
    hexa = "|".join(f"{ord(c):x}" for c in chars)
    # The fixed-width escapes end where their width does, whatever follows (\u003cabc is
    # "<abc" to a JSON or Python reader); other spellings end at the first non-digit.
    fixed = "|".join([*(f"u{ord(c):04x}" for c in chars), *(f"U{ord(c):08x}" for c in chars),
                      *(f"x{ord(c):02x}" for c in chars if ord(c) < 0x100)])
    return (rf"{_AMP}\#0*(?:{dec})(?![0-9]);?|{_AMP}\#x0*(?:{hexa})(?![0-9a-f]);?"
            rf"|\\(?:{fixed})|\\(?:u0*|U0*|x)(?:{hexa})(?![0-9a-f])"
            rf"|%{ord(chars[0]):x}|{_AMP}(?:{then})")


_OPEN = (rf"(?:[{_OPENERS}]|"
         + _numeric(_OPENERS, r"lt;?|lsaquo;|lang;|langle;|LeftAngleBracket;")
         + ")")
_CLOSE = (rf"(?:[{_CLOSERS}]|"
          + _numeric(_CLOSERS, r"gt;?|rsaquo;|rang;|rangle;|RightAngleBracket;")
          + ")")
# Skipped between the bracket and the name: whitespace, joiners, combining marks, selectors.
_SPACE = ("[\\s\u200c\u200d\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"
          "\ufe00-\ufe0f\ufe20-\ufe2f]")
_ENTITY = r"&(?:\#[0-9]{1,7}|\#x[0-9a-f]{1,6}|[a-z][a-z0-9]{1,31});?"
_SLASH = r"(?:[/\\\uff0f\u2044\u2215\u29f8]|%2f|&(?:amp;)*(?:\#0*47|\#x0*2f|sol);?)"
_START = rf"(?:[^\W\d]|[!?:]|{_ENTITY}|\\[ux])"


@cache
def _tag_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The opener (followed by something tag-like) and the bracket closing an opener made
    inert on the same line. Compiled on first need (milliseconds, and every hook is a fresh
    process): text without a candidate opener never needs them."""
    opener = re.compile(
        rf"(?=[{_OPENERS}&\\%])(?:{_OPEN})(?={_SPACE}*(?:{_SLASH}{_SPACE}*)?{_START})",
        re.IGNORECASE)
    closer = re.compile(rf"({INERT_OPEN}[^\n{_OPENERS}{_CLOSERS}&%\\]{{0,256}}?){_CLOSE}",
                        re.IGNORECASE)
    return opener, closer


# Format characters (Unicode category Cf) but the joiners, and controls but tab and newline.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x84\x86-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")
_BREAKS = re.compile("[\x85\u2028\u2029]")
_ASCII_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
# Where an opener could begin (cheap to compile and scan): else the text is left as it is.
_MAYBE = re.compile(f"[{_OPENERS}]|&[#a-zA-Z]|\\\\[uUx]|%3[cC]")
# A line of stored text that Markdown would read as structure: a heading, a fence, a rule.
_STRUCTURE = re.compile(r"^([ \t]*)(?=#|```|~~~|[=-]{3,}[ \t]*$)", re.MULTILINE)

T = TypeVar("T")


_CACHED_CHARS = 2048  # memoised texts: at most 2,048 of up to 2,048 characters (a few MB)


def neutralise(text: str) -> str:
    """``text`` with no tag-shaped sequence left (see the module docstring)."""
    # Pure, so memoised: a context renders each memory once per budget probe. Only short
    # texts, so a long-lived process (MCP server, daemon) never holds large ones.
    return _memoised(text) if len(text) <= _CACHED_CHARS else _neutralise(text)


@lru_cache(maxsize=2048)
def _memoised(text: str) -> str:
    return _neutralise(text)


def _neutralise(text: str) -> str:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.isascii():  # the common case: cheaper patterns
        text = _ASCII_CONTROLS.sub("", text)
    else:
        text = _INVISIBLE.sub("", _BREAKS.sub("\n", text))
    if not _MAYBE.search(text):
        return text
    opener, closer = _tag_patterns()
    text = opener.sub(INERT_OPEN, text)
    if INERT_OPEN not in text:
        return text
    return closer.sub(lambda m: m.group(1) + INERT_CLOSE, text)


def neutralise_lines(text: str) -> str:
    """Several lines of stored text (MEMORY.md) to embed in a Markdown wrapper: neutralised,
    and a line that would read as a heading, a fence or a rule is escaped with a backslash,
    so it cannot start a section of its own nor close memdir's."""
    return _STRUCTURE.sub(r"\1\\", neutralise(text))


def neutralise_data(value: T) -> T:
    """Every string in a JSON-like value (dict keys too) neutralised; other values as they
    are. For structured results an agent reads as text (MCP tool results, JSON context)."""
    if isinstance(value, str):
        return neutralise(value)  # type: ignore[return-value]
    if isinstance(value, Mapping):
        return {neutralise_data(k): neutralise_data(v)  # type: ignore[return-value]
                for k, v in value.items()}
    if isinstance(value, list):
        return [neutralise_data(v) for v in value]  # type: ignore[return-value]
    if isinstance(value, tuple):
        return tuple(neutralise_data(v) for v in value)  # type: ignore[return-value]
    return value


def fence(text: str) -> str:
    """A Markdown code fence longer than any backtick run in ``text``: it cannot close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)
