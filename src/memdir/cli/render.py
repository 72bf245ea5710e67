"""How the CLI shows things to people: tables, one memory in full, grouped lists, progress.

Machine output (``--json``) never comes from here: it is the ``to_dict`` of the values.

Invariant: every memory text shown here (names, descriptions, bodies, tags, meta, file
names) passes :func:`memdir.core.neutralise.neutralise`: an agent reads this output too (it runs
``memdir search`` or ``memdir get`` in a shell), so no tag written into stored text comes out
as one. ``--json`` keeps the text exactly as written. Control and bidi characters are
escaped visibly first (:mod:`memdir.cli.terminal`), so they show as ``\\x1b``, not vanish.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TextIO

from memdir.cli.terminal import escape
from memdir.core.model import Hit, Memory, Problem, Stats, format_time
from memdir.core.neutralise import neutralise
from memdir.core.usefulness import NEVER_USED_AFTER, Counts, Usefulness
from memdir.retrieval.context_format import one_line

if TYPE_CHECKING:
    from memdir.capture.extract import ExtractReport

__all__ = ["Progress", "grouped", "hits_table", "memories_table", "memory_full", "problems",
           "stats_text", "usefulness_lines"]


def _shown(text: str) -> str:
    """Stored text as people (and agents) see it: controls escaped visibly, then inert."""
    return neutralise(escape(text))


def _width() -> int:
    # os rather than shutil: shutil pulls in bz2 and lzma, milliseconds on every command.
    try:
        columns = int(os.environ.get("COLUMNS", "0")) or os.get_terminal_size().columns
    except (OSError, ValueError):
        columns = 120
    return max(60, columns)


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return ""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    # The last column takes what is left of the terminal.
    fixed = sum(widths[:-1]) + 2 * (len(headers) - 1)
    widths[-1] = max(20, min(widths[-1], _width() - fixed))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths[:-1], strict=True)]
        cells.append(_cut(row[-1], widths[-1]))
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def memories_table(memories: Sequence[Memory]) -> str:
    rows = [(m.id, m.type, m.scope, f"{m.relevance:.2f}", m.updated.strftime("%Y-%m-%d"),
             f"{m.name} — {m.description}" if m.description != m.name else m.name)
            for m in memories]
    return _shown(table(("ID", "TYPE", "SCOPE", "REL", "UPDATED", "MEMORY"), rows))


def hits_table(hits: Sequence[Hit]) -> str:
    rows = [(f"{h.score:.3f}", h.memory.id, h.memory.type, h.memory.scope,
             f"{h.memory.name} — {h.memory.description}"
             if h.memory.description != h.memory.name else h.memory.name)
            for h in hits]
    return _shown(table(("SCORE", "ID", "TYPE", "SCOPE", "MEMORY"), rows))


def grouped(memories: Sequence[Memory], titles: dict[str, tuple[str, str]]) -> str:
    """Memories grouped by type under section titles with icons (seed 000's layout)."""
    order: dict[str, list[Memory]] = {}
    for m in memories:
        order.setdefault(m.type, []).append(m)
    out = []
    for type_name, items in order.items():
        icon, title = titles.get(type_name, ("", type_name.title()))
        out.append(f"### {icon} {title}".replace("  ", " "))
        out.extend(f"- {m.description if m.description else m.name}  ({m.id})" for m in items)
        out.append("")
    return _shown("\n".join(out).rstrip())


def memory_full(memory: Memory) -> str:
    lines = [
        f"{memory.name}",
        f"  id: {memory.id}   type: {memory.type}   scope: {memory.scope}   "
        f"status: {memory.status}",
        f"  relevance: {memory.relevance}   reinforced: {memory.reinforced}   "
        f"shown: {memory.access_count}x"
        + (f" (last {format_time(memory.last_accessed)})" if memory.last_accessed else "")
        + f"   used: {memory.used_count}x"
        + (f" (last {format_time(memory.last_used)})" if memory.last_used else ""),
        f"  created: {format_time(memory.created)}   updated: {format_time(memory.updated)}",
        f"  description: {memory.description}",
    ]
    if memory.tags:
        lines.append(f"  tags: {', '.join(memory.tags)}")
    if memory.paths:
        lines.append(f"  paths: {', '.join(memory.paths)}")
    for key, value in memory.meta.items():
        lines.append(f"  {key}: {value}")
    lines.append(f"  file: {memory.path}")
    lines += ["", memory.body]
    return _shown("\n".join(lines))


def problems(found: Sequence[Problem], notices: Collection[str] = ()) -> str:
    """Doctor's findings: the faults first, then the ``notices`` kinds (nothing is broken:
    vectors still being filled, memories that disagree), each with what to do."""
    faults = [p for p in found if p.kind not in notices]
    told = [p for p in found if p.kind in notices]
    out = [f"{len(faults)} problem(s):" if faults else "no problems found"]
    for title, group, label in (("", faults, "fix"),
                                (f"{len(told)} notice(s):", told, "next")):
        if title and group:
            out.append(title)
        for p in group:
            # The file name and the message (a YAML error quotes the file) are stored text.
            out += [f"- [{p.kind}] {_shown(p.where)}", f"    {_shown(p.message)}",
                    f"    {label}: {p.hint}"]
    return "\n".join(out)


def stats_text(stats: Stats) -> str:
    lines = [f"{stats.total} memories ({stats.never_accessed} never accessed, "
             f"{stats.broken_files} broken files)"]
    for label, counts in (("by type", stats.by_type), ("by scope", stats.by_scope),
                          ("by status", stats.by_status)):
        if counts:
            lines.append(f"{label}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for scope, path in stats.directories.items():
        lines.append(f"{scope} directory: {path} (taxonomy {stats.taxonomy.get(scope)})")
    lines.append(f"index: {stats.index_path}")
    if stats.strength:
        lines.append("strength: " + ", ".join(f"{band} {n}" for band, n in stats.strength.items()))
    lines.append(f"last dream: {stats.last_dream or 'never'}")
    lines.extend(usefulness_lines(stats.usefulness))
    missing = getattr(stats, "missing_vectors", None)  # the SQLite store's, semantic on
    if missing is not None:
        lines.append(f"vectors: {missing} memories without one yet" + (
            " (embedded in the background by a long-lived memdir, or run `memdir reindex "
            "--embeddings`)" if missing else ""))
    llm = stats.llm
    if llm:
        budget = llm.get("daily_budget")
        lines.append(f"llm: {llm.get('provider')}"
                     + (f" ({llm['model']})" if llm.get("model") else "")
                     + f", {llm.get('calls_today', 0)} calls today"
                     + (f" of {budget} allowed" if budget is not None else "")
                     + f", {llm.get('failures_today', 0)} failed, "
                       f"{llm.get('input_tokens_today', 0)} tokens in, "
                       f"{llm.get('output_tokens_today', 0)} out")
        if llm.get("error"):
            lines.append(f"llm settings: {llm['error']} (hint: {llm.get('hint')})")
    return "\n".join(lines)


def _ratio(counts: Counts) -> str:
    return f"{counts.ratio:.0%}" if counts.ratio is not None else "-"


def usefulness_lines(use: Usefulness) -> list[str]:
    """How useful injected memories were (memdir.core.usefulness), for ``memdir stats``."""
    total = use.total
    lines = [f"usefulness: {total.used} of {total.injected} injections used "
             f"({_ratio(total)}); shown {total.shown} times in all"]
    if len(use.by_scope) > 1:  # one scope: the line above says it all
        lines.extend(f"  {scope}: {c.used} of {c.injected} used ({_ratio(c)}), shown {c.shown}"
                     for scope, c in use.by_scope)
    if use.most_useful:
        lines.append("most useful:")
        lines.extend(_shown(f"  {m.used} used, {m.reinforced} reinforced, {m.injected} "
                            f"injected: {m.name} ({m.id})") for m in use.most_useful)
    if use.never_used:
        shown = (f" (showing {len(use.never_used)})"
                 if use.never_used_count > len(use.never_used) else "")
        lines.append(f"injected {NEVER_USED_AFTER}+ times, never used: {use.never_used_count}"
                     f"{shown} (candidates to archive: `memdir archive ID`):")
        lines.extend(_shown(f"  {m.injected} injected, shown {m.shown}: {m.name} ({m.id})")
                     for m in use.never_used)
    return lines


class Progress:
    """A one-line progress bar on stderr (only on a terminal, or when forced)."""

    def __init__(self, label: str, *, stream: TextIO | None = None, force: bool = False) -> None:
        self.label = label
        # memdir's own bar: past the terminal-safe wrapper, whose escaping would show "\r".
        self.stream: TextIO = stream or getattr(sys.stderr, "raw", None) or sys.stderr
        self.enabled = force or self.stream.isatty()
        self.started = time.monotonic()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now_ = time.monotonic()
        if done < total and now_ - self._last < 0.1:
            return
        self._last = now_
        width = 30
        filled = int(width * done / total) if total else width
        bar = "#" * filled + "-" * (width - filled)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total}{end}")
        self.stream.flush()

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def when(value: datetime | None) -> str:
    return format_time(value) if value else "never"


def extract_report(report: ExtractReport) -> str:
    head = (f"{'would store' if report.dry_run else 'stored'} {len(report.stored)}, "
            f"{'would reinforce' if report.dry_run else 'reinforced'} {len(report.reinforced)}, "
            f"skipped {len(report.skipped)} (method: {report.method}, "
            f"{report.messages} messages)")
    lines = [head]
    for item in report.items:
        note = f" ({item.reason})" if item.reason else ""
        near = f" [near: {', '.join(item.near_duplicates)}]" if item.near_duplicates else ""
        text = _shown(one_line(item.content, 90))
        lines.append(f"  {item.action:<15} {item.type:<11} {text}{note}{near}")
    return "\n".join(lines)
