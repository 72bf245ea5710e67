"""Whole memory stores with labelled ground truth for the conflict and merge rules.

:func:`build` makes ``size`` memory records, deterministic for a seed, in one of two mixes:

- ``templated``: about 95% project facts from template families, 5% free text;
- ``diverse``: about 20% template families, 80% free text (generated developer notes and
  people's statements from the real chat datasets of ``shared/datasets``).

A *family* (``bench/store_families.py``) is one shape of fact (ports, env vars, endpoints,
owners, versions, hosts, cron schedules, feature flags, paths, ...) with several wordings; its
memories differ in subject and value, and no subject appears twice in a family, so the
random facts never contradict each other. On top of them, labelled:

- ``conflicts``: planted contradictions, about one pair per 100 memories: a second memory of
  a family's (or a free-text claim's) subject with another value, a number word, a unit, a
  name, an antonym, a negation or a reversed relation (``kinds`` says which);
- ``same_claims``: copies that differ only by one article more or less ("the", "a"):
  the merge rule should merge them.

Every other pair is "no conflict, no merge". Both members of a labelled pair have one type
and scope (consolidation compares memories of one type and scope). Chat statements say who
said them and keep their day (``date``), so similar-looking ones are not contradictions.

Command line: ``python bench/store_corpus.py --size 10000 --out DIR [--mix diverse]`` writes
``DIR/home`` (a MEMDIR home), ``DIR/project`` and ``DIR/labels.json`` (ids of the records in
order, the labelled pairs as index pairs).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from memdir.core.secrets import find_secrets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_families import FAMILIES, FREE_CLAIMS, NOTES, Shape

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
MIXES = {"templated": 0.95, "diverse": 0.20}  # the share of template families
CHAT_SHARE = 0.45  # of the free text, at most: statements from the chat datasets
CONFLICT_RATE = 0.01  # planted pairs per memory
SAME_CLAIM_RATE = 0.01  # article-only copies per memory

Pair = tuple[int, int]


@dataclass(frozen=True)
class Record:
    """One memory as ``store_many`` takes it (:meth:`item`)."""

    content: str
    type: str
    scope: str = "project"
    name: str | None = None
    date: str | None = None
    source: str = ""  # the family or kind of text it came from (not stored)

    def item(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self.content, "type": self.type, "scope": self.scope}
        if self.name:
            out["name"] = self.name
        if self.date:
            out["date"] = self.date
        return out


@dataclass
class Store:
    records: list[Record]
    conflicts: set[Pair] = field(default_factory=set)  # index pairs, smaller first
    same_claims: set[Pair] = field(default_factory=set)
    kinds: dict[Pair, str] = field(default_factory=dict)  # pair -> kind of contradiction
    # Memories to store after the store is loaded; some contradict a memory of the store
    # (extra index -> record index), the others nothing.
    extra: list[Record] = field(default_factory=list)
    extra_partners: dict[int, int] = field(default_factory=dict)


def pair(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def normal(text: str) -> str:
    return " ".join(text.lower().split())


# -- chat data ---------------------------------------------------------------------------------


def chat_statements(root: Path = DATASETS) -> list[Record]:
    """REALTALK turns of six words or more and MADial-Bench memory events, as user memories
    ("Emi said: ..."), each with the day it was said; [] when the datasets are missing.
    A statement whose words are all in a longer one of the same speaker is left out: "Hey
    Liza, how are you today?" said on many days is a near-duplicate the merge rule may
    rightly merge, not a labelled pair."""
    return list(_chat(root))


@cache
def _chat(root: Path) -> tuple[Record, ...]:
    out: list[Record] = []
    for path in sorted((root / "realtalk").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for key in sorted(k for k in data if k.startswith("session_")):
            for turn in data[key] if isinstance(data[key], list) else ():
                text = " ".join(str(turn.get("clean_text") or "").split())
                if len(text.split()) < 6:
                    continue
                day, month, year = str(turn.get("date_time", "")).split(",")[0].split(".")
                speaker = str(turn.get("speaker", "someone")).strip().title()
                out.append(Record(f"{speaker} said: {text}", "user", "user",
                                  date=f"{year}-{month}-{day}", source="realtalk"))
    memory = root / "madial" / "MADial-Bench-en-memory.json"
    if memory.exists():
        for line in memory.read_text(encoding="utf-8").splitlines():
            for item in json.loads(line).values() if line.strip() else ():
                out.append(Record(str(item["event"]), "user", "user", date=str(item["time"]),
                                  source="madial"))
    return tuple(_not_contained(out))


def _not_contained(records: list[Record]) -> list[Record]:
    """The records whose words are not all among a longer record's of the same speaker (the
    first word: "Emi", or MADial's person), in their order."""
    words = [frozenset(re.findall(r"[\w']+", r.content.lower())) for r in records]
    kept: dict[str, list[frozenset[str]]] = {}
    keep = set()
    for n in sorted(range(len(records)), key=lambda n: (-len(words[n]), n)):
        speaker = records[n].content.split(" ", 1)[0]
        if not any(words[n] <= longer for longer in kept.get(speaker, ())):
            kept.setdefault(speaker, []).append(words[n])
            keep.add(n)
    return [r for n, r in enumerate(records) if n in keep]


# -- building ----------------------------------------------------------------------------------


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.records: list[Record] = []
        self.slots: list[tuple[Shape, dict[str, str]] | None] = []
        self.seen: set[str] = set()
        self.subjects: dict[str, set[object]] = {}

    def add(self, record: Record, made: tuple[Shape, dict[str, str]] | None = None) -> int:
        key = normal(record.content)
        texts = [record.content, record.name or ""]
        if key in self.seen or find_secrets(texts):
            return -1
        self.seen.add(key)
        self.records.append(record)
        self.slots.append(made)
        return len(self.records) - 1

    def shaped(self, shape: Shape) -> int:
        """One memory of a family or free-text shape, with a subject new to that shape."""
        taken = self.subjects.setdefault(shape.space, set())
        for _ in range(200):
            subject, slots = shape.draw(self.rng)
            if subject not in taken:
                break
        else:
            return -1  # the shape's subjects are used up
        taken.add(subject)
        text = _sentence(self.rng.choice(shape.wordings).format(**slots))
        return self.add(Record(text, shape.type, shape.scope, source=shape.name),
                        (shape, slots))

    def note(self) -> int:
        text = self.rng.choice(NOTES)(self.rng)
        kind = self.rng.choice(("fact", "pitfall", "procedure", "decision", "reference",
                                "project", "feedback"))
        return self.add(Record(text, kind, source="note"))

    def contradict(self, index: int) -> tuple[int, str]:
        made = self.slots[index]
        assert made is not None
        shape, slots = made
        changed = shape.alter(self.rng, dict(slots))
        wordings = list(shape.wordings)
        original = self.records[index]
        same = next((w for w in wordings if _sentence(w.format(**slots)) == original.content),
                    wordings[0])
        wording = same if self.rng.random() < 0.65 or len(wordings) == 1 else \
            self.rng.choice([w for w in wordings if w != same])
        record = Record(_sentence(wording.format(**changed)), original.type, original.scope,
                        source=f"{shape.name}:conflict")
        return self.add(record), shape.kind

    def copy(self, index: int) -> int:
        original = self.records[index]
        text = without_article(original.content, self.rng)
        if text is None:
            return -1
        return self.add(Record(text, original.type, original.scope, original.name,
                               original.date, f"{original.source}:copy"))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def without_article(text: str, rng: random.Random) -> str | None:
    """The text with one article ("the", "a") taken out, or one "the" put in; None if
    neither is possible."""
    words = text.split(" ")
    spots = [i for i, w in enumerate(words) if w.lower() in ("the", "a") and i + 1 < len(words)]
    spots = [i for i in spots if i > 0] or spots  # keep a leading "The" when there is another
    if spots:
        i = rng.choice(spots)
        rest = words[:i] + words[i + 1:]
        if i == 0:
            rest[0] = rest[0][:1].upper() + rest[0][1:]
        return " ".join(rest)
    spots = [i for i, w in enumerate(words[:-1]) if w in ("in", "on", "to", "from", "for", "of")]
    if not spots:
        return None
    i = rng.choice(spots) + 1
    return " ".join([*words[:i], "the", *words[i:]])


def build(size: int, seed: int = 7, mix: str = "templated",
          chat: Sequence[Record] | None = None, extra: int = 0) -> Store:
    """``size`` records of the mix, with the planted pairs labelled (module docstring), and
    ``extra`` more to store one by one afterwards (:attr:`Store.extra`)."""
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {', '.join(MIXES)}")
    b = _Builder(seed * 1_000_003 + size)
    planted, copies = round(size * CONFLICT_RATE), round(size * SAME_CLAIM_RATE)
    base = size - planted - copies
    templated = round(base * MIXES[mix])
    free = base - templated
    pool = list(chat_statements() if chat is None else chat)
    b.rng.shuffle(pool)
    from_chat = min(len(pool), round(free * CHAT_SHARE))
    for record in pool[:from_chat]:
        b.add(record)
    free_claims = (free - from_chat) // 3  # claims that can be contradicted; the rest notes
    while len(b.records) < from_chat + free_claims:
        b.shaped(b.rng.choice(FREE_CLAIMS))
    while len(b.records) < free + templated:
        if len(b.records) < free:
            b.note()
        else:
            b.shaped(b.rng.choice(FAMILIES))
    claims = [i for i, s in enumerate(b.slots) if s is not None]
    b.rng.shuffle(claims)
    used: set[int] = set()
    conflicts: dict[Pair, str] = {}
    for index in claims:
        if len(conflicts) == planted:
            break
        other, kind = b.contradict(index)
        if other >= 0:
            conflicts[(index, other)] = kind
            used.update((index, other))
    same: list[Pair] = []
    candidates = [i for i in range(len(b.records)) if i not in used]
    b.rng.shuffle(candidates)
    for index in candidates:
        if len(same) == copies or len(b.records) == size:
            break
        other = b.copy(index)
        if other >= 0:
            same.append((index, other))
            used.update((index, other))
    while len(b.records) < size:  # a copy or contradiction was a duplicate: fill with notes
        b.note()
    store, where = _shuffled(b.records, conflicts, same, b.rng)
    if extra:
        _extra(b, store, where, [i for i in claims if i not in used], extra, mix)
    return store


def _extra(b: _Builder, store: Store, where: dict[int, int], free: list[int], count: int,
           mix: str) -> None:
    """``count`` new memories for single stores, with their own random stream (the store is
    the same with or without them): half contradict a memory of the store that is in no
    pair, the rest are new facts and notes of the mix."""
    b.rng = random.Random(len(store.records) * 31 + count)
    b.rng.shuffle(free)
    for index in free:
        if len(store.extra_partners) == count // 2:
            break
        other, _ = b.contradict(index)
        if other >= 0:
            store.extra_partners[len(store.extra)] = where[index]
            store.extra.append(b.records[other])
    while len(store.extra) < count:
        made = b.shaped(b.rng.choice(FAMILIES)) if b.rng.random() < MIXES[mix] else b.note()
        if made >= 0:
            store.extra.append(b.records[made])
    order = list(range(count))
    b.rng.shuffle(order)
    store.extra[:] = [store.extra[i] for i in order]
    moved = {old: new for new, old in enumerate(order)}
    store.extra_partners = {moved[i]: p for i, p in store.extra_partners.items()}


def _shuffled(records: list[Record], conflicts: dict[Pair, str], same: list[Pair],
              rng: random.Random) -> tuple[Store, dict[int, int]]:
    """Records in a random order, each planted second memory after its first one; and where
    each record went."""
    order = list(range(len(records)))
    base = set(order) - {b for _, b in conflicts} - {b for _, b in same}
    keys = {i: rng.random() for i in sorted(base)}
    for a, b in [*conflicts, *same]:
        keys[b] = rng.uniform(keys[a], 1.0)
    order.sort(key=lambda i: keys[i])
    where = {old: new for new, old in enumerate(order)}
    return Store([records[i] for i in order],
                 {pair(where[a], where[b]) for a, b in conflicts},
                 {pair(where[a], where[b]) for a, b in same},
                 {pair(where[a], where[b]): kind for (a, b), kind in conflicts.items()}), where


# -- loading -----------------------------------------------------------------------------------


def load(store: Store, home: Path, project: Path, batch: int = 5000) -> list[str]:
    """Store the records into a fresh home (``store_many``, words only); their ids in order."""
    from memdir import Memdir

    project.mkdir(parents=True, exist_ok=True)
    ids: list[str] = []
    with Memdir(home=home, project=project, semantic=False) as md:
        for start in range(0, len(store.records), batch):
            chunk = store.records[start:start + batch]
            ids += [m.id for m in md.store_many([r.item() for r in chunk])]
    if len(set(ids)) != len(store.records):
        raise RuntimeError(f"{len(store.records)} records became {len(set(ids))} memories")
    return ids


def labels(store: Store, ids: Sequence[str]) -> dict[str, Any]:
    return {"ids": list(ids), "sources": [r.source for r in store.records],
            "conflicts": sorted([a, b, store.kinds[(a, b)]] for a, b in store.conflicts),
            "same_claims": sorted([a, b] for a, b in store.same_claims)}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--size", type=int, default=10_000)
    p.add_argument("--out", type=Path, required=True, help="a new directory")
    p.add_argument("--mix", choices=sorted(MIXES), default="templated")
    p.add_argument("--seed", type=int, default=7)
    opts = p.parse_args(argv)
    store = build(opts.size, opts.seed, opts.mix)
    ids = load(store, opts.out / "home", opts.out / "project")
    (opts.out / "labels.json").write_text(json.dumps(labels(store, ids)) + "\n",
                                          encoding="utf-8")
    print(f"{len(ids):,} memories ({len(store.conflicts)} planted conflicts, "
          f"{len(store.same_claims)} same-claim copies) in {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
