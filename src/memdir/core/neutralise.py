"""Stored text made inert before memdir embeds it in anything an agent reads.

Memory text is data from many hands (team files, transcripts, text anyone typed), but memdir
writes it into an agent's prompt inside wrapper tags of its own (``<memory-context>``,
``<system-reminder>``). :func:`neutralise` is the one function every wrapper applies to every
piece of stored text it embeds (body, name, description, tags, meta, file names, MEMORY.md
lines, session excerpts): after it, no tag-shaped text survives from memory content, so every
tag in memdir's output is one memdir wrote, and they are balanced.

What counts as tag-shaped is judged on the text as a lenient reader decodes it
(:mod:`memdir.core.decoded_text`): every character NFKC-normalised (full-width ``＜`` ``｜``
``／``, circled ``ⓢ``, small ``﹤``), then the common escapes decoded (HTML entities ``&lt;``
``&#60;`` ``&#x3c;`` ``&amp;lt;``, ``\\u003c`` ``\\u{3c}`` ``\\x3c`` ``\\074`` ``\\/``,
``%3C`` ``%253C``; a second round for what the first decoded into an escape, ``%26lt;``).
There, a tag starts with an opening bracket (``<`` or a look-alike that NFKC leaves:
``〈`` ``⟨`` ``˂`` ``❮`` ...), then optional whitespace (or combining marks), at most two
slashes or pipes (``</x``, ``<\\/x``, the special tokens ``<|im_start|>`` ``<｜User｜>``),
optional whitespace, then a letter, ``!``, ``?``, ``_``, ``:`` or an entity. The original
piece that decoded to such an opener, in whatever spelling, becomes ``‹`` (U+2039, the
inert form: text that already uses it is left alone), and the piece that decoded to the
``>`` (or look-alike) closing it on the same line becomes ``›``. So
``</system-reminder>`` reads ``‹/system-reminder›``, ``&lt;|im_end|&gt;`` reads
``‹|im_end|›``, ``<ⓢⓨⓢⓣⓔⓜ>`` reads ``‹ⓢⓨⓢⓣⓔⓜ›``, ``Vec<u8>`` reads ``Vec‹u8›``, ``a < b``
reads ``a ‹ b``; a ``<`` before a digit, ``=``, ``-``, ``%``, ``|>`` or another non-letter
(``x <= 5``, ``<-``, ``1<2``, ``<%= x %>``, ``<|>``) stays, and so does everything that is
not an opener or its closer (``a | b``, ``50%``, ``%20``, ``C:\\path``, ``AT&T``).

Invariants:
- Output never holds an opener followed by tag-like text; the function is idempotent
  (``neutralise(neutralise(t)) == neutralise(t)``) and adds no line break of its own.
- Invisible format characters (zero-width spaces, bidi overrides, Unicode tag characters; the
  joiners U+200C/U+200D are kept) and control characters other than tab and newline are
  removed; ``\\r\\n``, ``\\r`` and Unicode line/paragraph separators become ``\\n``. Nothing
  else changes: the text stays readable and its words searchable.
- Pure and fast: text with no candidate opener (nor an escape that could spell one) costs
  two scans; the tag patterns are compiled once, on first need. Only the standard library
  is imported (``re``, ``unicodedata``, ``bisect``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import TypeVar

from memdir.core.decoded_text import COMBINING_MARKS, Decoded, decoded, has_marks

__all__ = ["INERT_CLOSE", "INERT_OPEN", "fence", "neutralise", "neutralise_data",
           "neutralise_lines"]

INERT_OPEN, INERT_CLOSE = "\u2039", "\u203a"  # ‹ ›

# Brackets a reader may take for "<" / ">" once each character is NFKC-normalised (which
# maps the full-width and small forms to ASCII, and which the decoded text has done).
_OPENERS = "<\u2329\u3008\u27e8\u27ea\u02c2\u1438\u276c\u276e\u29fc\u2039"
_CLOSERS = ">\u232a\u3009\u27e9\u27eb\u02c3\u1433\u276d\u276f\u29fd\u203a"
# Between the bracket and the name: a slash (a closing tag) or a pipe (a special token,
# <|im_start|>), in any of their look-alikes, at most two of them.
_SLASHES = r"/\\\u2044\u2215\u29f8|\u00a6\u01c0\u2223\u2502\u2503\u23d0\uffe8"
# Skipped between the bracket and the name: whitespace, joiners, combining marks, selectors.
_SPACE = f"[\\s\u200c\u200d{COMBINING_MARKS}]"
_COMBINING = re.compile(f"[{COMBINING_MARKS}]")
# A tag's name starts with a letter, "!", "?", ":", "_" or an entity no reader was sure of.
_START = r"(?:[^\W\d]|[!?:]|&(?:\#[0-9]{1,7}|\#x[0-9a-f]{1,6}|[a-z][a-z0-9]{1,31});?)"


@cache
def _tag_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The opener (followed by something tag-like) and the bracket closing an opener made
    inert on the same line, both run on the decoded text. Compiled on first need
    (milliseconds, and every hook is a fresh process): text without a candidate opener never
    needs them."""
    opener = re.compile(
        rf"[{_OPENERS}](?={_SPACE}*(?:[{_SLASHES}]{_SPACE}*){{0,2}}{_START})", re.IGNORECASE)
    closer = re.compile(rf"{INERT_OPEN}[^\n{_OPENERS}{_CLOSERS}]{{0,256}}?([{_CLOSERS}])")
    return opener, closer


# Format characters (Unicode category Cf) but the joiners, and controls but tab and newline.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x84\x86-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")
_BREAKS = re.compile("[\x85\u2028\u2029]")
_ASCII_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
# Where an opener could begin, before decoding (cheap to compile and scan): a bracket (or a
# full-width or small one), an entity, an escape, a percent-encoded "<", "&", "\\" or
# non-ASCII byte, or a full-width "&", "\\" or "%" (NFKC-normalised, they start one). Else
# the text stays as it is.
_MAYBE = re.compile(f"[{_OPENERS}\uff1c\ufe64\uff06\ufe60\uff3c\ufe68\uff05\ufe6a]"
                    "|&[#a-zA-Z]|\\\\[uUx0-3]|%(?:25)*(?:3[cC]|26|5[cC]|[c-fC-F][0-9a-fA-F])")
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
    if not _MAYBE.search(text) and not (has_marks(text)
                                        and _MAYBE.search(_COMBINING.sub("", text))):
        return text
    return _inert_tags(text)


def _inert_tags(text: str) -> str:
    """``text`` with each opener that the decoded text shows followed by something tag-like
    made ``‹``, and the closer of each on the same line ``›``: in the original's spelling
    (the whole ``&lt;`` or ``\\u003c`` becomes one ``‹``), everything else untouched. Text
    with combining marks is read twice, with them and without them."""
    edits: dict[tuple[int, int], str] = {}
    for view in ((decoded(text), decoded(text, drop_marks=True)) if has_marks(text)
                 else (decoded(text),)):
        _find_tags(view, edits)
    if not edits:
        return text
    out: list[str] = []
    last = 0
    for (start, end), mark in sorted(edits.items()):
        if start < last:
            continue  # within a piece already made inert
        out.extend((text[last:start], mark))
        last = end
    out.append(text[last:])
    return "".join(out)


def _find_tags(view: Decoded, edits: dict[tuple[int, int], str]) -> None:
    """Add to ``edits`` the span of the original behind each opener in ``view`` (to become
    ``‹``) and behind the closer of each (to become ``›``)."""
    opener, closer = _tag_patterns()
    opens = [m.start() for m in opener.finditer(view.text)]
    if not opens and INERT_OPEN not in view.text:
        return
    inert = INERT_OPEN.join(view.text[a + 1:b]
                            for a, b in zip([-1, *opens], [*opens, None], strict=True))
    for at in opens:
        edits.setdefault(view.source(at), INERT_OPEN)
    for match in closer.finditer(inert):
        edits.setdefault(view.source(match.start(1)), INERT_CLOSE)


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
