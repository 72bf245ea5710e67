"""Terminal-safe output: the CLI's stdout and stderr escape every character a terminal would
act on instead of showing.

Stored text is not memdir's: a team file, an imported transcript or a hand edit can hold an
escape sequence that recolours, retitles or rewrites the screen (ESC, CSI, OSC), a NUL, a
carriage return that overwrites a line, or a bidi override that shows text in another order
than it is stored. The CLI prints names, descriptions, bodies, file names and error messages
from such text, so it does not sanitise them case by case: :func:`install` wraps the process's
streams once, and everything printed through them passes :func:`escape`.

Invariants:
- Newline and tab pass unchanged; every other C0 control, DEL, every C1 control (U+0080 to
  U+009F: 8-bit CSI and OSC) and the bidi embedding, override and isolate characters
  (U+202A-U+202E, U+2066-U+2069, and the marks U+200E, U+200F, U+061C) come out visibly
  escaped, never raw.
- Human output shows them as Python would (``\\x1b``, ``\\u202e``). JSON output gets
  ``\\u001b``-style escapes: inside a JSON string they are the same characters, so the data
  a program reads back is unchanged (``json.dumps`` already escapes C0 itself; C1, DEL and bidi
  characters it would leave raw with ``ensure_ascii=False``).
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

__all__ = ["UNSAFE", "SafeStream", "escape", "install"]

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _human(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape(text: str, *, json: bool = False) -> str:
    """``text`` with every unsafe character escaped (for JSON: as a JSON string escape)."""
    return UNSAFE.sub(_json if json else _human, text)


class SafeStream:
    """A text stream whose ``write`` escapes what :func:`escape` escapes; everything else
    (flush, isatty, encoding, buffer...) is the wrapped stream's. ``raw`` is the wrapped
    stream, for memdir's own control output (the progress bar's carriage return)."""

    def __init__(self, stream: TextIO, *, json: bool = False) -> None:
        self.raw = stream
        self._json = json

    def write(self, text: str) -> int:
        self.raw.write(escape(text, json=self._json))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def install(*, json: bool = False) -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` for the rest of this process (once)."""
    if not isinstance(sys.stdout, SafeStream):
        sys.stdout = SafeStream(sys.stdout, json=json)
    if not isinstance(sys.stderr, SafeStream):
        sys.stderr = SafeStream(sys.stderr, json=json)
