"""The user's own prose in a message, split into clauses, for rule extraction
(:mod:`memdir.capture.rules`).

Invariants: code blocks (fenced or indented), blockquotes and pasted tool output or code lines
are never prose; list markers and Markdown emphasis are dropped; inline code, URLs and
quotations are kept in the text but blanked out, at the same length, in the masked copy the
triggers match against, so offsets in the two line up and no clause is split inside them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

__all__ = ["prose_lines", "sentences"]

# -- what is not the user's prose --------------------------------------------------------------
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LIST_MARK = re.compile(r"^(?:[-*+•]|\d{1,3}[.)]|#{1,6})\s+")
# A prompt or a traceback header starts pasted output that runs to the next blank line.
_OUTPUT_START = re.compile(r"^(?:\$ |% |>>> |PS [A-Z]:\\|[A-Z]:\\\S*>|\S+@\S+:\S*[$#] |"
                           r"Traceback \(most recent call last\))")
# Single lines of tool output or code. Case matters: log levels and SQL are upper case.
_TOOL_LINE = re.compile("|".join((
    r'^File "[^"]+", line \d+', r"^at [\w.$<>\[\]]+ ?\(", r"^E {2,}", r"^-->", r"^\.\.\. ",
    r"^(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Warning|Exit|Interrupt|Configured)(?::|$)",
    r"^(?:FAILED|PASSED|ERROR|SKIPPED|XFAIL|XPASS) \S+::", r"^[=_-]{3,}", r"^remote: ",
    r"^\[?\d{4}[-/]\d{2}[-/]\d{2}[ T]\d{2}:\d{2}", r"^\[?\d{2}:\d{2}:\d{2}",
    r"^\[?(?:DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE|PANIC)\b",
    r"^(?:error|warning|note|help|fatal|hint)(?:\[\w+\])?: ", r"^(?:npm|yarn|pnpm) (?:ERR|WARN)",
    r"^[\w./\\-]+\.\w+:\d+(?::\d+)?[:\s]", r"^[\w.-]+\s+\|\s", r"^[+-](?![\s+-])\S",
    r"^(?:diff --git|index [0-9a-f]{6,}|@@ |\+\+\+ |--- )", r"^[+-] {2,}", r"^#include",
    r"^(?:def|class) \w+\s*[(:]", r"^import [\w.]+(?: as \w+)?\s*$", r"^from [\w.]+ import ",
    r"^(?:const|let|var) \w+\s*=", r"^(?:async )?function\*? ?\w*\(", r"^(?:pub )?fn \w+",
    r"^(?:SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH) ", r"[;{]\s*$", r"^[})\]];?\s*$",
    r"^[{\[]", r"^[\w.\[\]'\"]+\s*(?:[-+*/]?=|==)\s*\S", r"^[\w.]+\([^)]*\)\s*$",
)))
_EMPHASIS = re.compile(r"(?<![\w*])\*{1,3}(?=\S)(.+?)(?<=\S)\*{1,3}(?![\w*])")
_INLINE_CODE = re.compile(r"(`+)[^`\n]+?\1")
_URL = re.compile(r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+")
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|‘[^’\n]*’|«[^»\n]*»|"
                     r"(?<![\w'])'(?=\S)(?:[^'\n]|(?<=\w)'(?=\w))*?(?<=\S)'(?!\w)")


def prose_lines(text: str) -> Iterator[tuple[str, str]]:
    """(line, masked line) for each line the user wrote as prose, list markers removed."""
    fence, in_output = "", False
    for raw in text.splitlines():
        stripped = raw.strip()
        if fence:
            fence = "" if stripped.startswith(fence) else fence
            continue
        if opening := _FENCE.match(raw):
            marker = opening.group(1)
            # A fence closed on its own line (```x```) is one line of code, not a block.
            fence = "" if marker in stripped[len(marker):] else marker[0] * 3
            continue
        in_output = bool(stripped) and (in_output or bool(_OUTPUT_START.match(stripped)))
        item = _LIST_MARK.match(stripped) and stripped[0] != "#"
        indented = raw.startswith(("    ", "\t")) and not item
        if (not stripped or in_output or indented or stripped.startswith(">")
                or _TOOL_LINE.search(stripped)):
            continue
        # Markdown emphasis is styling, not words; code spans and globs (release/*) stay as written.
        parts = re.split(r"(`+[^`]*`+)", _LIST_MARK.sub("", stripped, count=1))
        line = "".join(p if i % 2 else _EMPHASIS.sub(r"\1", p) for i, p in enumerate(parts))
        masked = line
        # Code, URLs and quotations are blanked out at the same length, so offsets line up.
        for pattern in (_INLINE_CODE, _URL, _QUOTED):
            masked = pattern.sub(lambda m: "_" * len(m.group(0)), masked)
        yield line, masked.replace("*", " ").replace("’", "'")  # emphasis is not a word


_SENTENCE_END = re.compile(r"[.!?;]+[\"')\]]*\s+")
_CLAUSE_BREAK = re.compile(r",\s+(?:and|but)\s+(?=(?:please\s+|also\s+)?(?:always|never|don't|"
                           r"do not|we|you|i|i'd|i'm)\b)", re.IGNORECASE)
_ABBREVIATIONS = set("e.g i.e eg ie vs cf approx incl esp aka a.k.a w.r.t mr mrs dr etc".split())


def sentences(line: str, masked: str) -> Iterator[tuple[str, str]]:
    """(original, masked) clauses of one prose line; no split falls inside a masked span."""
    cuts = [0]
    for match in _SENTENCE_END.finditer(masked):
        before = masked[max(0, match.start() - 12):match.start()]  # not the whole line: O(n)
        word = re.findall(r"[\w.]*$", before)[0].lower().strip(".")
        following = masked[match.end():match.end() + 1]
        abbreviation = match.group(0)[0] == "." and word in _ABBREVIATIONS and not (
            word == "etc" and following.isupper())
        if not abbreviation and not (word == "no" and following.isdigit()):  # "No. 5"
            cuts.append(match.end())
    cuts += [m.start() + 1 for m in _CLAUSE_BREAK.finditer(masked)]  # comma stays in front
    for start, end in itertools.pairwise([*sorted(set(cuts)), len(line)]):
        piece = line[start:end]
        lead = len(piece) - len(piece.lstrip())
        if piece.strip():
            yield piece.strip(), masked[start + lead:end].rstrip()
