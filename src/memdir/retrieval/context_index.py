"""The MEMORY.md lines of the session-start context: what the index adds to the memories shown.

The context lists the chosen memories first, then the project's MEMORY.md. That index names
every memory, so most of its lines repeat what is already above. :func:`index_lines` keeps
only the lines that add something.

Invariants:
- A line that links to memory files, every one of them shown above, is a duplicate and is
  dropped; so is a line without a link whose text is a shown memory's name, description or
  text (a hand-written index). A line that refers to anything not shown stays, whole.
- memdir's own title and marker lines (no information for the model) and blank lines are
  dropped; the order of the remaining lines is kept and no line is changed or cut here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from urllib.parse import unquote

from memdir.core.model import Memory

__all__ = ["index_lines"]

_TITLE = "# Memory Index"
# An inline Markdown link's target: ``[text](target)``, ``[text](<target>)``, with a title.
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+\"[^\"\n]*\"|\s+'[^'\n]*')?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, mailto:, file: ...: not a memory
_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")  # a list item's marker
_ENDS = " .!?;:…*_`\"'"  # dropped around a line's text before it is compared


def index_lines(index: str, shown: Sequence[Memory], directory: str) -> list[str]:
    """The lines of ``index`` (MEMORY.md of ``directory``, as injected) worth injecting after
    the ``shown`` memories (see the module docstring)."""
    paths = {_norm(str(m.path)) for m in shown if m.path is not None}
    texts = {_fold(t) for m in shown for t in (m.name, m.description, m.body)} - {""}
    out = []
    for line in index.split("\n"):
        stripped = line.strip()
        if not stripped or stripped == _TITLE or stripped.startswith("<!--"):
            continue
        targets = [_target(t, directory) for t in _LINK.findall(line)]
        if targets and all(t is not None and t in paths for t in targets):
            continue  # every memory it links to is listed above
        if not targets and _fold(_MARKER.sub("", stripped)) in texts:
            continue  # a hand-written line that says what a listed memory says
        out.append(line)
    return out


def _target(link: str, directory: str) -> str | None:
    """The file a link's target names, as a normalised absolute path; None for a URL."""
    target = link[1:-1] if link.startswith("<") else link
    target = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not target or _SCHEME.match(target):
        return None
    return _norm(os.path.join(directory, target))


def _norm(path: str) -> str:
    return os.path.normcase(os.path.normpath(path))


def _fold(text: str) -> str:
    return " ".join(text.split()).strip(_ENDS).casefold()
