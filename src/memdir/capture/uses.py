"""Uses: whether the agent drew on a memory injected into its session (``memdir stats``
reports the counts: :mod:`memdir.core.usefulness`).

A memory is *injected* into a session when the session-start context shows it in full or
recall surfaces it (``recall_surfaced``, with the time). It is *used* when what the agent
wrote or did afterwards in that session draws on it. The stop hook (and session end) has the
transcript at hand and asks :func:`check`, which reads only text, no model:

- a memory's **terms** come from its name, description and body: *plain* words (at least 3
  letters, no stop word nor everyday programming word, :data:`GENERIC`, compared by a light
  stem: "deploys", "deployment", "deploying" are one; names such as "PostgreSQL" are plain
  words too) and *strong* ones: identifiers (a token with a digit, ``_``, ``.``, ``/``,
  ``:``, or camelCase: ``staging-3``, ``warm.sh``, ``useQuery``; numbers of at least 3 digits
  that are no year) and the text of its code spans (```make release```); the parts of an
  identifier are plain words as well. A term that another memory injected into the same
  session also has tells them apart from nothing alone (below), and every term the user
  typed in the transcript read is dropped (the agent echoing the prompt is no use of a
  memory);
- the **evidence** is what the agent did on the main thread at or after the injection (a
  message without a time counts): its text and its tool calls (their whole input, the code
  it wrote included);
- the memory is **used** when a strong term of it is in the evidence, or one of its code
  spans (its words whole: ``make release`` is not in "remake releases"), or two of its plain
  terms are, or one plain term is a command the agent ran (the first word of a shell
  command: the memory said ``pnpm``, the agent ran ``pnpm install``). A term it shares with
  another injected memory never makes a use alone, but beside one distinctive plain term
  it is the second match, for the one memory of those sharing it with the most of its own
  terms there: of three memories on pnpm, "use pnpm, not npm" uses the one that says npm.

Invariants:
- A memory counts as used at most once per session: ``recall_surfaced.used`` is set in the
  write transaction that adds 1 to its ``usage.used_count`` (and recomputes its strength key),
  only where it was not set yet, so two hooks reading the same stretch count it once.
- A check reads each message of the agent once, at most :data:`EVIDENCE_BUDGET` characters
  in all, however many times memories were injected: its cost is linear in the transcript.
- ``recall_surfaced.checked`` says whether the injection's uses are known: NULL before any
  check, 1 once a check read all that followed it, 0 for good once a stretch after it went
  unread (a check past the budget, failed or timed out: :func:`mark_unchecked`) while it was
  not used. Stats count an injection only when it was used or checked (1), so a use missed
  never makes a memory look unused.
- Recording uses never fails the hook: the hook logs a failure and goes on (its time limit
  still ends it).
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memdir.capture.transcript import Message, Transcript
from memdir.core.model import format_time, parse_time
from memdir.retrieval.search import STOPWORDS

if TYPE_CHECKING:
    from memdir.core.index import Index

__all__ = ["EVIDENCE_BUDGET", "GENERIC", "Injected", "Terms", "Uses", "check", "drawn_on",
           "mark_unchecked", "record", "terms"]

#: Words of everyday programming talk: a memory sharing one with the agent's words says
#: nothing about whether the agent drew on it.
GENERIC = frozenset("""
able add added adding adds after again agent all also always another any app apply around
back bad before best better big bug bugs build call called calls can case cases change
changed changes check checked checks class clean close code command commands config could
create created data default different directory done doing each easy edit else empty end
error errors even every example exist false fast file files find first fix fixed fixes
follow full function get gets give go going good got hard have help here high hit how idea
input instead issue issues just keep kept know last least less let line lines list long look
looks low made main make makes many may memory method might module more most much must name
names need needed needs never new next note now number old one open option output package
part pass passed path per please point problem project put read ready real remove removed
repo result results return right run running runs same say see set should show shows simple
since small some something start step steps still sure take test tested testing tests text
than thanks that thing things think time today too true try two type types update updated
use used user uses using value values version want way well work works would write wrong yes
""".split())
EVIDENCE_CHARS = 20_000  # of one message: a tool call's input can be a whole file
#: Characters of the agent's messages one check reads in all (~2 s): a hook's window of the
#: transcript holds at most 8 MiB, and the stop hook has 20 s for everything it does.
EVIDENCE_BUDGET = 8_000_000
TYPED_CHARS = 1_000_000  # of what the user typed, read for the words the agent may echo

_TOKEN = re.compile(r"[A-Za-z0-9_]+(?:[./:\-][A-Za-z0-9_]+)*")
_CAMEL = re.compile(r"[a-z]+[A-Z]")  # useQuery, getElementById (not PostgreSQL, GitHub)
_CODE = re.compile(r"`([^`\n]{4,80})`")
_SPLIT = re.compile(r"[./:\-_]+")
_SUFFIXES = ("ments", "ment", "ings", "ing", "ers", "er", "ed", "es", "s")
_SHELL_BREAK = re.compile(r"&&|\|\||[;|\n]")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_RUN = re.compile(r"[a-z0-9_]+")  # the words of lower-case text, whole
_YEAR = re.compile(r"(?:19|20)\d\d")  # "2026" is in every other text of this year
K = TypeVar("K", bound=Hashable)


def _stem(word: str) -> str:
    """A light stem: "deploys", "deployment", "deploying" and "deploy" give one."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word[-1:] in ("e", "y") and len(word) > 3 else word


def _plain(word: str) -> str | None:
    """The stem of a plain word that may tell a memory apart, or None."""
    lower = word.lower()
    if len(lower) < 3 or not lower.isalpha() or lower in STOPWORDS or lower in GENERIC:
        return None
    return _stem(lower)


def _strong(token: str) -> bool:
    """Whether a token is an identifier: a digit with a letter, a separator inside, camelCase,
    or a number of 3 digits or more that is no year. Words joined by hyphens ("read-only")
    are not."""
    if token.isdigit():
        return len(token) >= 3 and not _YEAR.fullmatch(token)
    if len(token) < 4:
        return False
    if any(c in token for c in "_./:") or _CAMEL.match(token):
        return True
    return any(c.isdigit() for c in token)


@dataclass(frozen=True)
class Terms:
    """What a text offers to match: strong terms (identifiers, lower case, and the last part
    of a path), plain stems, and its code spans (lower case, spaces folded)."""

    strong: frozenset[str] = frozenset()
    plain: frozenset[str] = frozenset()
    phrases: frozenset[str] = frozenset()

    def __sub__(self, other: Terms) -> Terms:
        return Terms(self.strong - other.strong, self.plain - other.plain,
                     self.phrases - other.phrases)


def terms(text: str) -> Terms:
    """The strong terms, plain stems and code spans of a text (the module docstring's rules)."""
    strong: set[str] = set()
    plain: set[str] = set()
    for match in _TOKEN.finditer(text):
        token = match.group()
        if _strong(token):
            lower = token.lower()
            strong.add(lower)
            if "/" in lower and _strong(lower.rsplit("/", 1)[1]):
                strong.add(lower.rsplit("/", 1)[1])  # "scripts/warm.sh" is "warm.sh" too
        for part in _SPLIT.split(token):
            stem = _plain(part)
            if stem:
                plain.add(stem)
    phrases = {" ".join(span.lower().split()) for span in _CODE.findall(text)}
    return Terms(frozenset(strong), frozenset(plain),
                 frozenset(p for p in phrases if _distinctive(p)))


def _distinctive(phrase: str) -> bool:
    """A code span counts only if it holds something distinctive (not "`make`", "`run it`")."""
    return any(_strong(t) or _plain(t) for t in _TOKEN.findall(phrase))


@dataclass(frozen=True)
class Injected(Generic[K]):
    """A memory injected into a session: its key (the store's), its text, and when."""

    key: K
    text: str
    at: datetime | None = None


def _commands(tool_input: Mapping[str, Any]) -> set[str]:
    """The programs a shell tool call ran: the first word of each command, path and
    ``VAR=value`` prefixes left out (``bash -lc "..."`` is read inside)."""
    command = tool_input.get("command")
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        if len(command) >= 3 and command[0].rsplit("/", 1)[-1] in _SHELLS:
            command = command[-1]
        else:
            command = shlex.join(command)
    if not isinstance(command, str):
        return set()
    found = set()
    for segment in _SHELL_BREAK.split(command[:EVIDENCE_CHARS]):
        words = [w for w in segment.split() if "=" not in w and w not in ("sudo", "env")]
        if words:
            stem = _plain(words[0].rsplit("/", 1)[-1].strip("'\"()"))
            if stem:
                found.add(stem)
    return found


def _flatten(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            _flatten(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _flatten(item, out)


def _evidence(message: Message) -> str:
    if message.kind != "tool_use":
        return message.text[:EVIDENCE_CHARS]
    parts = [message.text]
    _flatten(dict(message.tool_input), parts)
    return "\n".join(parts)[:EVIDENCE_CHARS]


@dataclass(frozen=True)
class _Act:
    """One message of the agent, read once: when, its terms, its text (lower case, spaces
    folded) and the words in it (when code spans are looked for), the programs it ran."""

    at: datetime | None
    found: Terms
    said: str
    words: frozenset[str]
    ran: frozenset[str]


@dataclass
class _Evidence:
    """What the agent did from some moment on, message by message: the terms, the phrases
    (of those looked for) it said, and the programs it ran."""

    phrases: dict[str, frozenset[str]]  # the code spans looked for, and their words
    strong: set[str] = field(default_factory=set)
    plain: set[str] = field(default_factory=set)
    said: set[str] = field(default_factory=set)
    ran: set[str] = field(default_factory=set)

    def add(self, act: _Act) -> None:
        self.strong |= act.found.strong
        self.plain |= act.found.plain
        self.ran |= act.ran
        # A code span's words all in the message first: a set test spares a search of the
        # message's text for every span (hundreds of them, megabytes of text).
        self.said.update(p for p, words in self.phrases.items() if p not in self.said
                         and words <= act.words and p in act.said)

    def draws_on(self, found: Terms) -> bool:
        """Whether it draws on a memory with these distinctive terms."""
        return bool(found.strong & self.strong or found.phrases & self.said
                    or len(found.plain & self.plain) >= 2 or found.plain & self.ran)

    def leans_on(self, found: Terms, shared: Terms) -> bool:
        """One own plain term there, and one shared with another memory (a second match)."""
        return len(found.plain & self.plain) == 1 and bool(
            shared.strong & self.strong or shared.phrases & self.said
            or shared.plain & self.plain or shared.plain & self.ran)

    def weight(self, found: Terms) -> int:
        """How much of a memory's own terms is there (an identifier, a code span, a program
        run: two plain words)."""
        return (2 * len(found.strong & self.strong) + 2 * len(found.phrases & self.said)
                + 2 * len(found.plain & self.ran) + len(found.plain & self.plain))


@dataclass(frozen=True)
class Uses(Generic[K]):
    """What a transcript tells of the memories injected into its session: the keys of those
    drawn on, in the order given, and whether everything the agent did after their injection
    was read (``complete``; past :data:`EVIDENCE_BUDGET` characters the rest is not)."""

    used: tuple[K, ...] = ()
    complete: bool = True


def _read(messages: Sequence[Message], since: datetime | None, budget: int,
          spans: bool) -> tuple[list[_Act], bool]:
    """Each message at or after ``since`` (every one when None; one without a time always),
    read once and in order while the characters read stay within ``budget``; whether all
    were read. ``spans``: whether code spans are looked for (their words are wanted)."""
    acts: list[_Act] = []
    for message in messages:
        if since is not None and message.timestamp is not None and message.timestamp < since:
            continue
        text = _evidence(message)
        budget -= len(text)
        if budget < 0:
            return acts, False
        ran = _commands(message.tool_input) if message.kind == "tool_use" else set()
        said = " ".join(text.lower().split())
        acts.append(_Act(message.timestamp, terms(text), said,
                         frozenset(_RUN.findall(said)) if spans else frozenset(), frozenset(ran)))
    return acts, True


def drawn_on(injected: Sequence[Injected[K]], transcript: Transcript) -> list[K]:
    """The keys of the injected memories that the agent's words and tool calls after their
    injection draw on (the rules are in the module docstring)."""
    return list(check(injected, transcript).used)


def check(injected: Sequence[Injected[K]], transcript: Transcript,
          budget: int = EVIDENCE_BUDGET) -> Uses[K]:
    """Which injected memories the agent drew on (:func:`drawn_on`), reading each message of
    the agent once and at most ``budget`` characters of them in all: the cost grows with the
    transcript, not with how many times memories were injected into it."""
    messages = [m for m in transcript.messages if m.role == "assistant" and not m.sidechain
                and m.kind in ("text", "tool_use")]
    if not injected or not messages:
        return Uses()
    typed = terms("\n".join(m.text for m in transcript.user_messages())[:TYPED_CHARS])
    own = [terms(item.text) for item in injected]
    seen: dict[str, int] = {}
    for found in own:  # what two injected memories have in common tells neither apart
        for term in {*found.strong, *found.plain, *found.phrases}:
            seen[term] = seen.get(term, 0) + 1
    common = frozenset(term for term, n in seen.items() if n > 1)
    everyone = Terms(common, common, common)
    mine = [found - everyone - typed for found in own]
    # Shared terms never make a use alone, and never hide one: beside a distinctive term
    # they count ("pnpm" in three memories, "npm" in one: "use pnpm, not npm" uses it).
    shared = [found - (found - everyone) - typed for found in own]
    times = [item.at for item in injected]
    stamps = [at for at in times if at is not None]
    phrases = {p: frozenset(_RUN.findall(p)) for found in (*mine, *shared)
               for p in found.phrases}
    acts, complete = _read(messages, min(stamps) if len(stamps) == len(times) else None,
                           budget, bool(phrases))
    # From the latest injection back to the earliest, the evidence of each is that of the
    # one after it plus the messages in between: each message is added once.
    evidence = _Evidence(phrases)
    for act in acts:
        if act.at is None:  # a message without a time counts for every injection
            evidence.add(act)
    timed = sorted([(act.at, n, act) for n, act in enumerate(acts) if act.at is not None],
                   key=lambda item: (item[0], item[1]))
    order = sorted([(at, i) for i, at in enumerate(times) if at is not None], reverse=True)
    used = set()
    for at, i in [*order, *((None, i) for i, at in enumerate(times) if at is None)]:
        while timed and (at is None or timed[-1][0] >= at):
            evidence.add(timed.pop()[2])
        if evidence.draws_on(mine[i]):
            used.add(i)
        elif evidence.leans_on(mine[i], shared[i]) and all(
                evidence.weight(mine[j]) < evidence.weight(mine[i])
                for j in range(len(own)) if j != i and _share(shared[i], shared[j])):
            used.add(i)  # of the memories sharing its words, the one the agent followed
    return Uses(tuple(item.key for i, item in enumerate(injected) if i in used), complete)


def _share(a: Terms, b: Terms) -> bool:
    return bool(a.strong & b.strong or a.plain & b.plain or a.phrases & b.phrases)


def record(index: Index, session_id: str, transcript: Transcript, at: datetime) -> int:
    """Count as used, once for the session, each memory injected into it that the transcript
    shows the agent drew on; how many were newly counted. The others are marked checked, or
    unchecked when the transcript was not read in full (:func:`mark_unchecked`)."""
    if not session_id or index.read_only:
        return 0
    rows = index.conn.execute(
        "SELECT s.dir, s.id, s.surfaced, s.used, m.name, m.description, m.body "
        "FROM recall_surfaced s JOIN memories m ON m.dir = s.dir AND m.id = s.id "
        "WHERE s.session_id = ? ORDER BY s.surfaced, s.dir, s.id", (session_id,)).fetchall()
    injected: dict[tuple[str, str], Injected[tuple[str, str]]] = {}
    done = set()
    for row in rows:
        key = (row[0], row[1])
        injected.setdefault(key, Injected(key, f"{row[4]}\n{row[5]}\n{row[6]}",
                                          parse_time(row[2])))
        if row[3] is not None:
            done.add(key)
    pending = [key for key in injected if key not in done]
    if not pending:
        return 0
    uses = check(list(injected.values()), transcript)
    found = [k for k in uses.used if k not in done]
    counted = index.count_uses(session_id, found, format_time(at)) if found else 0
    with index.write() as conn:  # a use counted is checked whatever this marks
        conn.executemany(
            "UPDATE recall_surfaced SET checked = 1 WHERE session_id = ? AND dir = ? AND "
            "id = ? AND checked IS NULL" if uses.complete else
            "UPDATE recall_surfaced SET checked = 0 WHERE session_id = ? AND dir = ? AND "
            "id = ? AND used IS NULL", [(session_id, *key) for key in pending])
    return counted


def mark_unchecked(index: Index, session_id: str) -> None:
    """Mark the memories injected into the session and not used in it as unchecked for good:
    a stretch of what the agent did after their injection went unread (a check failed or
    timed out, the transcript was too long to read at once), so a use may have been missed,
    and stats leave them out. Never raises: the caller is already handling a failure."""
    if not session_id or index.read_only:
        return
    with contextlib.suppress(Exception), index.write() as conn:
        conn.execute("UPDATE recall_surfaced SET checked = 0 WHERE session_id = ? AND "
                     "used IS NULL", (session_id,))
