"""Loading the recall-quality datasets (REALTALK, MADial-Bench English) as units and queries,
and the text helpers of the harness's variants (stop words, neighbours, query expansion).

A *unit* is one retrievable text (a REALTALK turn, a MADial memory); a *query* is a question
or a dialogue context with the ids of the units that should come back. Nothing here looks at
answers: REALTALK answers are never read, and a MADial query is built only from the dialogue
lines before the test turn (the test turn is the assistant line that voices the memory, so
including it would leak the target; ``context="leak"`` exists only to show how much).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from memdir.retrieval.search import STOPWORDS

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"

_ID = re.compile(r"D\s*0*(\d+)\s*[:;]\s*0*(\d+)", re.IGNORECASE)
_RANGE = re.compile(r"D\s*0*(\d+)\s*[:;]\s*0*(\d+)\s*-\s*(?:D\s*0*(\d+)\s*[:;]\s*)?0*(\d+)",
                    re.IGNORECASE)
MAX_RANGE = 30  # a longer "D1:2-D1:90" is more likely a typo than evidence
_TOKEN = re.compile(r"\w+")
# NLTK's English list, plus the contraction halves \w+ leaves behind ("i'm" -> "i", "m").
STOP_EXTENDED = STOPWORDS  # memdir's own list since it measured better (see docs)
_LINE = re.compile(r'^<([^<>:]+)>\s*:\s*"?(.*?)"?\s*$', re.DOTALL)


@dataclass(frozen=True)
class Unit:
    id: str
    text: str
    group: str = ""  # REALTALK session ("D3"): neighbours are taken within one group only
    before: str = ""  # REALTALK: the turn before it in its session, "speaker: text" ("" first)
    date: str = ""  # the day it was said (REALTALK) or happened (MADial), YYYY-MM-DD


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    relevant: tuple[str, ...]
    category: str = ""


@dataclass
class Corpus:
    """One index's worth of units (a REALTALK conversation, the MADial memory bank)."""

    name: str
    units: list[Unit]
    queries: list[Query]
    counts: Counter[str] = field(default_factory=Counter)


def normalise_ids(raw: str) -> tuple[list[str], bool]:
    """Evidence ids in one raw string ("D1: 3", "D01:03", "D5:3.", "D17;39", "D2:1-D2:4",
    "D1:2; D3:4", "23:29"), as canonical "D<s>:<t>" ids, and whether a range was expanded."""
    out: list[str] = []
    expanded = False

    def keep(s: str | int, t: str | int) -> None:
        ident = f"D{int(s)}:{int(t)}"
        if ident not in out:
            out.append(ident)

    def expand(m: re.Match[str]) -> str:
        nonlocal expanded
        s1, t1, s2, t2 = m.group(1), int(m.group(2)), m.group(3) or m.group(1), int(m.group(4))
        if int(s1) == int(s2) and 0 <= t2 - t1 <= MAX_RANGE:
            expanded = True
            for t in range(t1, t2 + 1):
                keep(s1, t)
        else:
            keep(s1, t1)
            keep(s2, t2)
        return " "

    if re.fullmatch(r"\s*\d+\s*:\s*\d+\s*", raw):  # "23:29": the "D" was forgotten
        raw = "D" + raw.strip()
    rest = _RANGE.sub(expand, raw)
    for m in _ID.finditer(rest):
        keep(m.group(1), m.group(2))
    return out, expanded


def load_realtalk(root: Path = DATASETS / "realtalk") -> list[Corpus]:
    """Every conversation as a corpus: turns "speaker: clean_text" keyed by dia_id."""
    corpora = []
    for path in sorted(root.glob("*.json"), key=lambda p: int(re.findall(r"\d+", p.name)[0])):
        data = json.loads(path.read_text(encoding="utf-8"))
        units: list[Unit] = []
        counts: Counter[str] = Counter()
        sessions = sorted((k for k in data if re.fullmatch(r"session_\d+", k)),
                          key=lambda k: int(k.split("_")[1]))
        for key in sessions:
            for turn in data[key]:
                ids, _ = normalise_ids(str(turn.get("dia_id", "")))
                if len(ids) != 1:
                    counts["turns without a usable dia_id"] += 1
                    continue
                text = f"{turn.get('speaker', '?')}: {(turn.get('clean_text') or '').strip()}"
                group = ids[0].split(":")[0]
                before = units[-1].text if units and units[-1].group == group else ""
                units.append(Unit(ids[0], text, group, before,
                                  _day(str(turn.get("date_time", "")))))
        known = {u.id for u in units}
        queries = []
        for n, qa in enumerate(data.get("qa", [])):
            raw = [e for e in qa.get("evidence") or [] if isinstance(e, str)]
            wanted: list[str] = []
            for item in raw:
                ids, expanded = normalise_ids(item)
                counts["evidence entries"] += 1
                reformatted = bool(ids) and ids != [item.strip()] and not expanded
                counts["entries reformatted"] += reformatted
                counts["ranges expanded"] += expanded
                counts["entries unreadable"] += not ids
                wanted.extend(i for i in ids if i not in wanted)
            found = [i for i in wanted if i in known]
            counts["evidence ids dropped (not in conversation)"] += len(wanted) - len(found)
            if not found:
                counts["questions skipped (no evidence left)"] += 1
                continue
            counts["questions used"] += 1
            queries.append(Query(f"{path.stem}#{n}", qa["question"], tuple(found),
                                 str(qa.get("category", ""))))
        counts["turns"] = len(units)
        corpora.append(Corpus(path.stem, units, queries, counts))
    return corpora


def _day(stamp: str) -> str:
    """REALTALK's "DD.MM.YYYY, HH:MM:SS" as YYYY-MM-DD ("" when it is not one)."""
    m = re.match(r"\s*(\d{1,2})\.(\d{1,2})\.(\d{4})", stamp)
    return f"{m.group(3)}-{int(m.group(2)):02d}-{int(m.group(1)):02d}" if m else ""


def memory_text(fields: dict[str, str]) -> str:
    """A MADial memory as one unit: the event, then its scene, emotion and date."""
    return (f"{fields.get('event', '').strip()} (scene: {fields.get('scene', '')}; "
            f"emotion: {fields.get('emotion', '')}; time: {fields.get('time', '')})")


def _speaker_lines(lines: list[str]) -> list[tuple[bool, str]]:
    """(is_user, "Name: text") per line; a line without a "<Name>:" prefix takes its side from
    its position (users speak on odd lines after <BOD>)."""
    out = []
    for n, line in enumerate(lines):
        m = _LINE.match(line.strip())
        if m:
            out.append((m.group(1) != "Assistant", f"{m.group(1)}: {m.group(2).strip()}"))
        else:
            out.append((n % 2 == 1, line.strip().strip("<>\"")))
    return out


def madial_context(lines: list[str], turn: int, context: str) -> str:
    """The query text for a dialogue whose memory is due at line ``turn``.

    ``user``: the last user line; ``lastK``: the last K lines; ``users``: every user line;
    ``all``: every line; ``leak``: every line *including* the test turn (diagnostic only).
    Multi-line contexts are joined most recent first, so memdir's cap on query tokens drops
    the oldest words rather than the newest.
    """
    end = turn + 1 if context == "leak" else turn
    spoken = [s for s in _speaker_lines(lines[:end]) if s[1] not in ("BOD", "EOD")][::-1]
    if context == "user":
        chosen = [t for user, t in spoken if user][:1]
    elif context.startswith("last") and context[4:].isdigit():
        chosen = [t for _, t in spoken][: int(context[4:])]
    elif context == "users":
        chosen = [t for user, t in spoken if user]
    elif context in ("all", "leak"):
        chosen = [t for _, t in spoken]
    else:
        raise ValueError(f"unknown MADial context {context!r}: user, lastK, users, all, leak")
    return "\n".join(chosen)


def load_madial(context: str, root: Path = DATASETS / "madial") -> Corpus:
    """The English memory bank as units and each dialogue (first test turn) as a query."""
    units = []
    for line in (root / "MADial-Bench-en-memory.json").read_text(encoding="utf-8").splitlines():
        if line.strip():
            for key, fields in json.loads(line).items():
                day = str(fields.get("time", ""))
                units.append(Unit(str(key), memory_text(fields),
                                  date=day if re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) else ""))
    known = {u.id for u in units}
    counts: Counter[str] = Counter(memories=len(units))
    queries = []
    path = root / "MADial-Bench-en-dialogue.json"
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        item = json.loads(line)
        relevant = tuple(str(r) for r in item["relevant-id"] if str(r) in known)
        counts["relevant ids dropped (not in bank)"] += len(item["relevant-id"]) - len(relevant)
        turns = item.get("test-turn") or []
        if not relevant or not turns:
            counts["dialogues skipped"] += 1
            continue
        counts["dialogues used"] += 1
        text = madial_context(item["dialogue"], int(turns[0]), context)
        queries.append(Query(f"madial#{n}", text, relevant, str(item.get("user-id", ""))))
    return Corpus(f"madial-{context}", units, queries, counts)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def contents(units: list[Unit], neighbours: int) -> list[str]:
    """Each unit's stored text: itself first (memdir names and describes a memory by its first
    line, which BM25 weighs most), then the ``neighbours`` units before and after it, in order,
    within its group."""
    if neighbours <= 0:
        return [u.text for u in units]
    out = []
    for n, unit in enumerate(units):
        near = [units[j].text for j in range(n - neighbours, n + neighbours + 1)
                if j != n and 0 <= j < len(units) and units[j].group == unit.group]
        out.append("\n\n".join([unit.text, *near]))
    return out


# Question scaffolding beyond memdir's stop words ("query words" variant): the words a
# question is asked with rather than what it is about.
QUESTION_WORDS = frozenset("""
tell remember recall know mention mentioned mentions say said says talk talked talking ever
happen happened happens share shared kind sort type thing things one someone something
anything many much often time times
""".split())


def prepare(query: str, stop: str, question_words: bool = False) -> str:
    """The query with STOP_EXTENDED words dropped (``stop="extended"``) unless none is left;
    ``stop="memdir"`` leaves it to memdir's own, shorter list. ``question_words`` drops
    QUESTION_WORDS (and memdir's stop words) too, unless nothing is left."""
    drop: frozenset[str] = frozenset()
    if stop == "extended":
        drop = STOP_EXTENDED
    if question_words:
        drop = drop | STOPWORDS | QUESTION_WORDS
    if drop:
        kept = [t for t in tokens(query) if t not in drop]
        return " ".join(kept) if kept else query
    return query


def expand(query: str, first: list[str], texts: dict[str, str], df: Counter[str],
           terms: int) -> str:
    """Pseudo-relevance feedback: the query plus the ``terms`` words weighing most (tf × idf)
    in the feedback units ``first``."""
    seen = set(tokens(query)) | STOP_EXTENDED
    scores: dict[str, float] = defaultdict(float)
    for uid in first:
        for word, tf in Counter(tokens(texts.get(uid, ""))).items():
            if word not in seen and len(word) > 2 and not word.isdigit():
                scores[word] += tf * math.log(len(texts) / df[word])
    best = sorted(scores, key=lambda w: -scores[w])[:terms]  # stable: ties keep text order
    return " ".join([query, *best])
