"""Uses: whether the agent drew on a memory injected into its session (``memdir stats``
reports the counts: :mod:`memdir.core.usefulness`).

A memory is *injected* into a session when the session-start context shows it in full or
recall surfaces it (``recall_surfaced``, with the time). It is *used* when what the agent
wrote or did afterwards in that session draws on it. The stop hook (and session end) has the
transcript at hand and asks :func:`drawn_on`, which reads only text, no model:

- a memory's **terms** come from its name, description and body: *plain* words (at least 3
  letters, no stop word nor everyday programming word, :data:`GENERIC`, compared by a light
  stem: "deploys", "deployment", "deploying" are one; names such as "PostgreSQL" are plain
  words too) and *strong* ones: identifiers (a token with a digit, ``_``, ``.``, ``/``,
  ``:``, or camelCase: ``staging-3``, ``warm.sh``, ``useQuery``; numbers of at least 3 digits
  that are no year) and the text of its code spans (```make release```); the parts of an
  identifier are plain words as well. A term that another memory injected into the same session also
  has is dropped (it tells them apart from nothing), and so is every term the user typed in
  the transcript read (the agent echoing the prompt is no use of a memory);
- the **evidence** is what the agent did on the main thread at or after the injection (a
  message without a time counts): its text and its tool calls (their whole input, the code
  it wrote included);
- the memory is **used** when a strong term of it is in the evidence, or two of its plain
  terms are, or one plain term is a command the agent ran (the first word of a shell
  command: the memory said ``pnpm``, the agent ran ``pnpm install``).

Invariants:
- A memory counts as used at most once per session: ``recall_surfaced.used`` is set in the
  write transaction that adds 1 to its ``usage.used_count`` (and recomputes its strength key),
  only where it was not set yet, so two hooks reading the same stretch count it once.
- Recording uses never fails the hook: the hook logs a failure and goes on.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memdir.capture.transcript import Message, Transcript
from memdir.core.model import format_time, parse_time
from memdir.retrieval.search import STOPWORDS

if TYPE_CHECKING:
    from memdir.core.index import Index

__all__ = ["GENERIC", "Injected", "Terms", "drawn_on", "record", "terms"]

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

_TOKEN = re.compile(r"[A-Za-z0-9_]+(?:[./:\-][A-Za-z0-9_]+)*")
_CAMEL = re.compile(r"[a-z]+[A-Z]")  # useQuery, getElementById (not PostgreSQL, GitHub)
_CODE = re.compile(r"`([^`\n]{4,80})`")
_SPLIT = re.compile(r"[./:\-_]+")
_SUFFIXES = ("ments", "ment", "ings", "ing", "ers", "er", "ed", "es", "s")
_SHELL_BREAK = re.compile(r"&&|\|\||[;|\n]")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
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


@dataclass
class _Acts:
    """What the agent did from one moment on: the terms, the text (lower case, spaces
    folded) and the programs it ran."""

    found: Terms
    said: str
    ran: frozenset[str]


def _acts(messages: Sequence[Message], at: datetime | None) -> _Acts:
    strong: set[str] = set()
    plain: set[str] = set()
    ran: set[str] = set()
    said = []
    for message in messages:
        if at is None or message.timestamp is None or message.timestamp >= at:
            text = _evidence(message)
            found = terms(text)
            strong |= found.strong
            plain |= found.plain
            said.append(" ".join(text.lower().split()))
            if message.kind == "tool_use":
                ran |= _commands(message.tool_input)
    return _Acts(Terms(frozenset(strong), frozenset(plain)), "\n".join(said), frozenset(ran))


def drawn_on(injected: Sequence[Injected[K]], transcript: Transcript) -> list[K]:
    """The keys of the injected memories that the agent's words and tool calls after their
    injection draw on (the rules are in the module docstring)."""
    messages = [m for m in transcript.messages if m.role == "assistant" and not m.sidechain
                and m.kind in ("text", "tool_use")]
    if not injected or not messages:
        return []
    typed = terms("\n".join(m.text for m in transcript.user_messages()))
    own = [terms(item.text) for item in injected]
    seen: dict[str, int] = {}
    for found in own:  # what two injected memories have in common tells neither apart
        for term in {*found.strong, *found.plain, *found.phrases}:
            seen[term] = seen.get(term, 0) + 1
    common = {term for term, n in seen.items() if n > 1}
    shared = Terms(frozenset(common), frozenset(common), frozenset(common))
    acts: dict[datetime | None, _Acts] = {}
    used = []
    for item, found in zip(injected, own, strict=True):
        mine = found - shared - typed
        done = acts.get(item.at) or acts.setdefault(item.at, _acts(messages, item.at))
        if (mine.strong & done.found.strong or any(p in done.said for p in mine.phrases)
                or len(mine.plain & done.found.plain) >= 2 or mine.plain & done.ran):
            used.append(item.key)
    return used


def record(index: Index, session_id: str, transcript: Transcript, at: datetime) -> int:
    """Count as used, once for the session, each memory injected into it that the transcript
    shows the agent drew on; how many were newly counted."""
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
    if len(done) == len(injected):
        return 0
    found = [k for k in drawn_on(list(injected.values()), transcript) if k not in done]
    return index.count_uses(session_id, found, format_time(at)) if found else 0
