"""Two claims laid side by side: which words differ, and whether that is the same thing said
with another value, another thing, or the same claim in other words.

A claim is read into *slots* (:func:`slots`): lower-cased tokens, lightly stemmed; number
words as numbers and a number with its unit as one amount (:func:`memdir.upkeep.values.quantity`:
"10 MB", "two", "30s"); "don't" as "do not"; copulas ("is", "are", ":", "=") as one token;
articles and fillers (:data:`memdir.upkeep.values.ARTICLES`) left out. :func:`align` lines two
claims up (longest matching blocks) and classifies each stretch that differs:

- a *value*: one amount for another of the same dimension ("8005" / "9999", "10 MB" /
  "10 GB", "two" / "three"), opposites ("up" / "down", "read-only" / "read-write"), one name
  for another ("Datadog" / "Grafana Loki", "Go" / "Rust", "us-east-1" / "eu-west-1"), or a
  negation said or not ("do not");
- *other* words: anything else ("a green build" for "two approvals").

Where a stretch sits decides what it means: before the predicate (the first verb,
auxiliary or copula; :func:`memdir.upkeep.values.is_verb`) it names the *subject*, after it,
the *value*. "Service 172 listens on port 8172" / "Service 271 listens on port 8271" differ
in the subject first: two services, no conflict. "The API rate limit is 100" / "The admin
API rate limit is 1000" too. "Service 5 listens on port 8005" / "... port 9999" differ in
one value only: one subject, two values, a conflict. For verbs whose subject is the value
("Priya owns the billing service", :data:`memdir.upkeep.values.INVERSE`) the sides swap.

The same words crossed around a pivot are a reversed relation ("Redirect HTTP to HTTPS" /
"Redirect HTTPS to HTTP"); crossed around a copula ("Postgres 15 is the database" / "The
database is Postgres 15") or with the pivot turned to its converse ("X before Y" / "Y
after X") they are the same claim.

Invariants: :func:`align` is symmetric in its verdict and pure; a reason quotes the texts'
own words; nothing here knows more than the two texts (a store-wide test of how many values
one subject has is :mod:`memdir.upkeep.conflicts`'s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from functools import lru_cache

from memdir.upkeep.claims import disagreement
from memdir.upkeep.lexicon import FUNCTION, LIGHT, stem
from memdir.upkeep.slots import BE, Slot, cue, identity, slots, value_place
from memdir.upkeep.values import AUXILIARIES, COORDINATORS, INVERSE, antonyms, name_kind

__all__ = ["Alignment", "Slot", "align", "slots"]

_WORDS = frozenset({"word", "verb", "command", "cap"})
# A rule's opposite when it leads the claim ("Never rebase X" / "Feel free to rebase X").
# As :func:`_permission` normalises them ("it's fine to", "It is fine to": "it fine to").
PERMISSIONS = frozenset(("feel free to", "you may", "you can", "may", "can", "go ahead and",
                         "it fine to", "it ok to", "it okay to", "ok to", "okay to",
                         "free to"))
_DIGITS = re.compile(r"\d+")
_VERSIONED = re.compile(r"[v=@]\d|\d\.\d")
# The shape of a component's, file's or variable's name, not of a person, product or place:
# camelCase, snake_case, a path, a dotted or many-hyphened name.
_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_IDENTIFIER = re.compile(r"[a-z][A-Z]|_|/|\.\w|\w-\w+-\w")
# Where something lives, not which component a claim is about: a path, a URL, a host.
_LOCATION = re.compile(r"(?:~?/|\./|[a-z][\w+.-]*://)\S+|[\w-]+(?:\.[\w-]+)*"
                       r"\.(?:internal|local|lan|corp|com|net|org|io|dev|cloud)(?::\d+)?",
                       re.IGNORECASE)
_CONVERSE = {stem(x): stem(y) for x, y in (("before", "after"), ("after", "before"),
                                            ("above", "below"), ("below", "above"),
                                            ("over", "under"), ("under", "over"))}


@dataclass(frozen=True)
class Alignment:
    """How two claims differ. ``verdict``: ``same`` (no slot differs), ``conflict`` (one
    subject, another value; ``reason`` says which), ``subject`` (they are about different
    things), ``converse`` (the same claim, its relation turned around) or ``other`` (other
    words; rules cannot tell). ``subject_differs``: some words that differ name the
    subject (the merge rule never joins such a pair)."""

    verdict: str
    reason: str = ""
    subject_differs: bool = False
    slot: tuple[int, int] | None = None  # (a slot's start, end) of a one-value conflict
    # Some stretch is another value, or only the subject differs ("the API" / "the admin
    # API"): the merge rule's veto.
    values_differ: bool = False
    # Two names or identifiers differ (beside whatever else): two things, for the stance rule.
    names_differ: bool = False
    other_slot: tuple[int, int] | None = None  # the same stretch in the second claim
    # How a conflict's reason is said: the kind and the two stretches as written ("said":
    # in the stance's words, :func:`memdir.upkeep.claims.disagreement`).
    told: tuple[str, str, str] | None = None


def _kind(left: tuple[Slot, ...], right: tuple[Slot, ...]) -> str:
    """What a stretch that differs is: amount, antonym, name, negation or other."""
    if not left or not right:
        rest = [s for s in left or right if s.key not in AUXILIARIES and s.kind != "neg"]
        return "negation" if not rest and any(s.kind == "neg" for s in left or right) else "other"
    for one, other in ((left, right), (right, left)):  # "Never X" / "Feel free to X"
        if all(s.kind == "neg" or s.key in AUXILIARIES for s in one) \
                and any(s.kind == "neg" for s in one) \
                and _permission(other):
            return "negation"
    if len(left) == len(right) == 1:
        x, y = left[0], right[0]
        if x.kind == y.kind == "amount":
            return "amount"  # "10 MB" / "10 GB"; "10%" / "10 GB" of one thing too
        tx, ty = x.text.lower().strip("`"), y.text.lower().strip("`")
        if antonyms(tx, ty):
            return "antonym"
        if tx != ty and name_kind(tx) is not None and name_kind(tx) == name_kind(ty):
            return "name"  # "fish" / "zsh": a name that is also a word, beside its kind's
        if x.kind == y.kind == "name" and _DIGITS.sub("", x.key) == _DIGITS.sub("", y.key) \
                and _VERSIONED.search(x.key):
            return "amount"  # "UUIDv7" / "UUIDv4", "--max-workers=6" / "=3": a version
            # ("billing0" / "billing1" are two things)
        if x.kind in _WORDS and y.kind in _WORDS \
                and _typo(x.text.lower(), y.text.lower()):
            return "typo"
    if len(left) <= 3 and len(right) <= 3 and all(
            s.kind in ("name", "cap", "amount") for s in left + right) and any(
            s.kind in ("name", "cap") for s in left) and any(
            s.kind in ("name", "cap") for s in right):
        kl, kr = _name_kind(left), _name_kind(right)
        if kl and kr:
            return "name" if kl == kr else "other"
        pl, pr = _parts(left), _parts(right)
        names = [s.text for s in left + right if s.kind == "name"]
        if any(_IDENTIFIER.search(n) for n in names) \
                and not (len(pl & pr) == 1 and len(pl - pr) <= 1 and len(pr - pl) <= 1) \
                and not (_located(left) and _located(right)):
            return "other"  # "in ticketSyncView" / "in emailIngester", "in schemaSyncStore"
            # / "in importSyncStore": which component (a family of names);
        # "settings.toml" / "settings.yaml" differ in one part: one thing's two values; two
        # paths or hosts are two places of one thing ("at mysql-7.internal" / "at pg-2...")
        return "name?"  # names memdir does not know: a value only where a value goes
    return "other"


def _permission(part: tuple[Slot, ...]) -> bool:
    words = " ".join(s.text.lower().replace("’", "'").removesuffix("'s") for s in part)
    return words.replace(" is ", " ") in PERMISSIONS


def _located(part: tuple[Slot, ...]) -> bool:
    """Whether a stretch is one path, URL or host name."""
    return len(part) == 1 and _LOCATION.fullmatch(part[0].text.strip("`")) is not None


def _typo(x: str, y: str) -> bool:
    """Whether two words are one word mistyped ("remiders" / "reminders"): long, the same
    first letter, and nearly the same letters."""
    return min(len(x), len(y)) >= 5 and x[0] == y[0] and x.isalpha() and y.isalpha() \
        and SequenceMatcher(None, x, y).ratio() >= 0.85


def _parts(part: tuple[Slot, ...]) -> set[str]:
    """The words inside identifiers: "settingsFile.toml" -> settings, file, toml."""
    return {w.lower() for s in part for w in _PART.findall(s.text) if len(w) > 1}


def _name_kind(part: tuple[Slot, ...]) -> str | None:
    return next((k for s in part if (k := name_kind(s.key)) is not None), None)


def _identifiers(seq: tuple[Slot, ...]) -> frozenset[str]:
    """The names of components, files and variables (:data:`_IDENTIFIER`'s shape, not a
    tool memdir knows): two claims naming other ones are about other things."""
    return frozenset(s.key for s in seq if s.kind == "name" and name_kind(s.key) is None
                     and _IDENTIFIER.search(s.text))


def _tools(seq: tuple[Slot, ...]) -> frozenset[str]:
    return frozenset(s.key for s in seq if s.kind == "name" and name_kind(s.key) is not None)


def _other_things(sa: tuple[Slot, ...], sb: tuple[Slot, ...]) -> bool:
    """Whether two claims name other components, or each a tool the other does not
    ("never run bazel ..." / "always run podman ...": two rules)."""
    ta, tb = _tools(sa), _tools(sb)
    return _identifiers(sa) != _identifiers(sb) or (bool(ta - tb) and bool(tb - ta))


def _roles_swapped(sa: tuple[Slot, ...], sb: tuple[Slot, ...], ca: int | None,
                   cb: int | None) -> bool:
    """Whether the one word before a's verb is the object right after the same verb in b:
    "Anna taught me" / "I taught Anna" (the roles swapped; never a merge)."""
    if ca is None or cb is None or ca == 0 or cb + 1 >= len(sb) or sa[ca].key != sb[cb].key:
        return False
    if any(t.key == "by" for t in (*sa, *sb)):
        return False  # the passive: "owned by X" / "X owns"
    return sa[ca - 1].key == sb[cb + 1].key and sa[ca - 1].kind not in ("verb", "command") and \
        all(t.key != sa[ca - 1].key for t in sb[:cb])


def _moved(part: tuple[str, ...], elsewhere: list[tuple[str, ...]]) -> bool:
    """Whether a stretch of one claim stands, whole, in another place of the other."""
    n = len(part)
    return n > 0 and any(other[k:k + n] == part for other in elsewhere
                         for k in range(len(other) - n + 1))


def _quote(part: tuple[Slot, ...]) -> str:
    return " ".join(s.text for s in part)


def _crossed(a: tuple[Slot, ...], b: tuple[Slot, ...]) -> str | None:
    """``reversed`` when b is a with two items crossed around one pivot ("X to Y" / "Y to
    X"); ``converse`` when the pivot is a copula or turned to its converse; else None."""
    if len(a) != len(b):
        return None
    ka, kb = [s.key for s in a], [s.key for s in b]
    if sorted(ka) != sorted(kb) and sorted(_CONVERSE.get(k, k) for k in ka) != sorted(kb):
        return None
    for i in range(1, len(ka)):
        for j in range(i + 1, len(ka)):
            x, pivot, y = ka[:i], ka[i:j], ka[j:]
            if kb == y + pivot + x or kb == y + [_CONVERSE.get(p, p) for p in pivot] + x:
                if all(p in COORDINATORS for p in pivot):
                    return None  # "X and Y" / "Y and X": a list, in another order
                if pivot == [BE] or kb != y + pivot + x:
                    return "converse"
                return "reversed"
    return None


@lru_cache(maxsize=65536)
def align(a: str, b: str) -> Alignment:
    """Line two claims up and say how they differ (module docstring). The two are lined up
    in one order whichever is given first, so the verdict is symmetric; the reason quotes
    them in the order given."""
    if a <= b:
        return _align(a, b)
    found = _align(b, a)
    if found.told is None:
        return replace(found, slot=found.other_slot, other_slot=found.slot)
    kind, one, other = found.told
    said = disagreement(a, b) if kind == "said" else None
    return replace(found, slot=found.other_slot, other_slot=found.slot,
                   told=(kind, other, one),
                   reason=said.reason if said is not None else _reason(kind, other, one))


def _reason(kind: str, one: str, other: str) -> str:
    return {
        "amount": (f"other numbers: {one} in one, {other} in the other"
                   if not any(c.isalpha() for c in one + other)
                   else f"other amounts: {one!r} in one, {other!r} in the other"),
        "antonym": f"opposite words: {one!r} in one, {other!r} in the other",
        "name": f"other values: {one!r} in one, {other!r} in the other",
        "negation": (f"one says {one!r}, the other {other!r}" if one and other
                     else f"one says {one or other!r}, the other does not"),
        "reversed": f"the relation is reversed: {one!r} in one, {other!r} in the other",
    }[kind]


def _align(a: str, b: str) -> Alignment:
    sa, sb = slots(a), slots(b)
    ka, kb = [s.key for s in sa], [s.key for s in sb]
    if ka == kb:
        return Alignment("same")
    ops = [op for op in SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    first, last = ops[0], ops[-1]
    crossed = _crossed(sa[first[1]:last[2]], sb[first[3]:last[4]])
    if crossed == "converse":
        return Alignment("converse")
    if crossed == "reversed":
        said = disagreement(a, b)  # in the stance's words: "one prefers X over Y, ..."
        if said is not None:
            return Alignment("conflict", said.reason, told=("said", "", ""))
        one, other = _quote(sa[first[1]:last[2]]), _quote(sb[first[3]:last[4]])
        return Alignment("conflict", _reason("reversed", one, other),
                         told=("reversed", one, other))
    ca, cb = cue(sa), cue(sb)
    inverse = ca is not None and cb is not None and (sa[ca].key in INVERSE or identity(sa, ca)) \
        and (sb[cb].key in INVERSE or identity(sb, cb))  # both: the verdict is symmetric

    def subject(i1: int, i2: int, j1: int, j2: int) -> bool:
        if ca is None or cb is None:
            return False
        if inverse:  # "X owns Y": Y names what the claim is about
            return i1 > ca and j1 > cb
        # Both start before the predicate (and may run into it: "payload index uses" /
        # "trace manifest uses", with "index" read as a verb).
        return (i1 < ca and j1 < cb) or (i2 <= ca and j2 <= cb and (i1 < ca or j1 < cb))

    kinds = [_kind(sa[i1:i2], sb[j1:j2]) for _, i1, i2, j1, j2 in ops]
    parts = [(tuple(ka[i1:i2]), tuple(kb[j1:j2])) for _, i1, i2, j1, j2 in ops]
    crossing = _roles_swapped(sa, sb, ca, cb) or _roles_swapped(sb, sa, cb, ca)
    for n, (left, right) in enumerate(parts):  # a phrase moved, not changed: "In CI, run X"
        if _moved(left, [r for m, (_, r) in enumerate(parts) if m != n]) \
                or _moved(right, [x for m, (x, _) in enumerate(parts) if m != n]):
            kinds[n] = "moved"
    # A negation is the claim's polarity wherever it stands ("Never mock ..."), not its subject.
    in_subject = [kind not in ("negation", "moved", "typo") and subject(i1, i2, j1, j2)
                  and any(t.key not in FUNCTION and t.key not in LIGHT
                          for t in (*sa[i1:i2], *sb[j1:j2]))  # not "that", "when"
                  for kind, (_, i1, i2, j1, j2) in zip(kinds, ops, strict=True)]
    if any(in_subject):
        # Only the subject differs ("the API" / "the admin API"), or another name is the
        # subject ("Kevin said ..." / "Paola said ..."): never one memory.
        named_subject = any(
            inside and any(t.kind in ("name", "cap") for t in sa[i1:i2])
            and any(t.kind in ("name", "cap") for t in sb[j1:j2])
            for (_, i1, i2, j1, j2), inside in zip(ops, in_subject, strict=True))
        return Alignment("subject", subject_differs=True,
                         values_differ=all(in_subject) or named_subject)
    if all(k == "typo" for k in kinds):
        return Alignment("same")  # "remiders" / "reminders"
    differ = crossing or any(k in ("amount", "antonym", "name", "name?", "negation")
                             for k in kinds)
    names = any(k in ("name", "name?") for k in kinds) or _other_things(sa, sb)
    if len(ops) != 1 or kinds[0] in ("other", "moved"):
        return Alignment("other", values_differ=differ, names_differ=names)
    _, i1, i2, j1, j2 = ops[0]
    # Without a predicate, only a trailing value of a subject named in two words or more
    # ("Max upload size 10 MB" / "10 GB"; not "Good before" / "Good after").
    subject_words = sum(t.key not in FUNCTION and t.key not in LIGHT for t in sa[:i1])
    if ca is None and kinds[0] != "negation" and (
            not (i2 == len(sa) and j2 == len(sb)) or subject_words < 2):
        return Alignment("other", values_differ=differ)
    if kinds[0] == "name?":
        if not (value_place(sa, i1, ca) and value_place(sb, j1, cb)):
            return Alignment("other", values_differ=differ)
        kinds[0] = "name"
    said = disagreement(a, b)  # the stance's reason where it sees one: "other numbers: 3.11 ..."
    if said is not None:
        return Alignment("conflict", said.reason, slot=(i1, i2),
                         values_differ=True, other_slot=(j1, j2), told=("said", "", ""))
    one, other = _quote(sa[i1:i2]), _quote(sb[j1:j2])
    return Alignment("conflict", _reason(kinds[0], one, other),
                     slot=(i1, i2), values_differ=True, other_slot=(j1, j2),
                     told=(kinds[0], one, other))
