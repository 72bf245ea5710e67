"""The secret detector: provider token formats, credential assignments, high-entropy values
and credentials named in prose.

Four kinds of rule; the first is a list of :class:`Rule` (a label, the lower-cased substrings
a match cannot do without, a regex, and an optional check of the matched value):

- provider formats (:data:`memdir.core.secret_rules.PROVIDER_RULES`): a token whose shape names its
  issuer (``ghp_…``, ``xoxb-…``, ``AKIA…``, ``SG.….…``, a private key block, a URL with a
  password in it), about 70 issuers, learnt from the public formats that secret scanners use;
- a credential assignment (:mod:`memdir.core.secret_assignments`): a key whose last noun
  names a credential (``PASSWORD=``, ``db_password:``, ``"api_secret":``, ``export
  GITHUB_TOKEN=``) holding any literal, however weak (``PASSWORD=hunter``), or a key holding
  another credential word (``auth``, ``cookie``) with a password-shaped value; never a
  placeholder, a reference (``${X}``, ``var.db_password``, ``os.environ[...]``), a number, a
  type, a path or prose;
- an entropy check for any other assignment: a long value that looks random (mixed letters
  and digits, at least 4 bits of entropy a character) and is not a hash of a known kind nor
  base64 of text;
- a credential named in prose ("the staging db password is …", "root password on the
  bastion: …", "login: admin / …"): only a value shaped like a password counts.

Invariants:
- The common case costs about what one regex pass costs: a rule's regex runs only on text
  that holds one of its clues, and the clues of token-shaped rules are looked for (by one trie
  regex) only in runs of 16 or more token characters, which most memories do not have.
  Regexes compile on first use; nothing here imports more than ``re``, ``math``, ``heapq``
  at start-up (``base64`` only for the rare high-entropy value).
- Findings name the kind of secret and show a redacted preview, never the secret.
- Benign look-alikes stay allowed: paths, branch names (``sk-1234-fix-login``), git SHAs,
  UUIDs, lockfile hashes, placeholders (``<your-api-key>``, ``changeme``, ``${DB_PASSWORD}``,
  masked or published example tokens: ``ghp_XXXX…``, ``AKIAIOSFODNN7EXAMPLE``), public keys,
  publishable keys (Stripe ``pk_``) and prose about secrets. ``bench/secret_detection.py``
  measures both sides on a labelled corpus, on every write path, and on a held-out one
  written before the rules were read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from memdir.core.secret_assignments import (
    CLUES,
    INNER_ASSIGNMENT,
    PLACEHOLDER,
    assignments,
    regex,
    shannon_entropy,
)
from memdir.core.secret_rules import PROVIDER_RULES, Rule, looks_random, strong_password

__all__ = ["Rule", "find_secrets", "looks_random", "redact_secrets", "shannon_entropy"]

# A credential named in prose, then its value: "the staging db password is hunter2-Xq9!zP",
# "root password on the bastion: …", "wifi password 5h76…", "login for Grafana: admin / …".
# Only a value shaped like a password counts, so "the token expires after 1 hour" is prose.
_PROSE_WORDS = ("password", "passwd", "passphrase", "pwd", "pass", "secret", "token", "key",
                "credential", "creds", "login")
_PROSE_WORD = (
    r"(?:passwords?|passwd|passphrase|pwd|pass|secret|token|credentials?|creds|login|"
    r"(?:api|access|secret|private|signing|license|master)[ _-]key)\b"
)
_PROSE_VALUE = r"[ \t]*[\"'`]?(?P<value>[^\s\"'`,;]{8,64})"
# After a separator, "user / password" may stand for the value ("login: admin / …").
_PROSE_SEP = (r"[^\n:=.,;!?()\[\]{}<>\"'`]{0,40}?[ \t]*(?::|=|\bis\b|\bwas\b)"
              r"(?:[ \t]*[\w.@-]{1,40}[ \t]*/(?!/))?" + _PROSE_VALUE)
_PROSE_NEXT = r"[ \t]" + _PROSE_VALUE


# Where a prose word can start: a stem, or a few characters before "key" ("api key",
# "signing key"). Found with str.find: a case-insensitive regex scan of a long MEMORY.md
# costs 10x more, as no literal prefix guides it.
_PROSE_STEMS = (("pass", (0,)), ("pwd", (0,)), ("secret", (0,)), ("token", (0,)),
                ("cred", (0,)), ("login", (0,)), ("key", (4, 7, 8)))


def _prose_starts(text: str) -> list[int]:
    lowered = text.lower()
    if len(lowered) != len(text):  # a character that lower-cases to two: positions differ
        return [m.start() for m in regex(_PROSE_WORD).finditer(text)]
    starts: set[int] = set()
    for stem, offsets in _PROSE_STEMS:
        at = lowered.find(stem)
        while at >= 0:
            starts.update(at - back for back in offsets if at >= back)
            at = lowered.find(stem, at + 1)
    return sorted(starts)


def _prose_credentials(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each value that prose names as a credential: after a separator, or
    right after the word if it is a long password-shaped word ("password 5h76…%")."""
    for at in _prose_starts(text):
        if at and (text[at - 1].isalnum() or text[at - 1] in "_:/.-"):
            continue  # part of a name ("1Password", "db_password", "arn:…:secret:…")
        word = regex(_PROSE_WORD).match(text, at)
        if word is None:
            continue
        for form, min_len in ((_PROSE_SEP, 8), (_PROSE_NEXT, 10)):
            match = regex(form).match(text, word.end())
            if match is None:
                continue
            value = match.group("value").rstrip(".")
            if (len(value) < min_len or regex(PLACEHOLDER).search(value)
                    or regex(INNER_ASSIGNMENT).match(value)
                    or (any(c in value for c in "()[]{}") and not looks_random(value, 16, 3.5))):
                continue  # short, a placeholder, an assignment, a call ("Base64URL(JSON)")
            if strong_password(value):
                yield match.start("value"), match.start("value") + len(value)
                break


# Every (clue, rule) pair, flat: one pass of C-speed substring tests picks the rules to run.
_CLUES = tuple((clue, n) for n, rule in enumerate(PROVIDER_RULES) for clue in rule.clues)
_SPACED_CLUES = tuple((clue, n) for clue, n in _CLUES if PROVIDER_RULES[n].spaced)
# Every other rule matches inside one run of 16 or more of these characters, its clue too:
# the clues are looked for in those runs only (most memories have none), by one regex.
_TOKEN_RUN = r"(?<![a-z0-9_\-+/=.~$:@])[a-z0-9_\-+/=.~$:@]{16,}"


def _by_clue() -> dict[str, frozenset[int]]:
    """Each clue of a token rule -> the rules of every clue it starts with: the clue regex
    reports one clue a position (the longest), which implies its prefixes."""
    clues = {clue for clue, n in _CLUES if not PROVIDER_RULES[n].spaced}
    return {c: frozenset(n for clue, n in _CLUES if c.startswith(clue)
                         and not PROVIDER_RULES[n].spaced) for c in clues}


def _trieregex(words: Iterable[str]) -> str:
    """One regex for a set of literals, as a trie ("gh(?:p_|o_|…)"): at a position it tries
    one branch a character instead of every literal, and it prefers the longest literal."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items())
                    if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


@cache
def _clue_index() -> tuple[re.Pattern[str], dict[str, frozenset[int]]]:
    index = _by_clue()
    return re.compile(f"(?=({_trieregex(index)}))"), index


def _rules_for(lowered: str) -> list[Rule]:
    hits = {n for clue, n in _SPACED_CLUES if clue in lowered}
    runs = " ".join(regex(_TOKEN_RUN).findall(lowered))
    if runs:
        pattern, index = _clue_index()
        for clue in set(pattern.findall(runs)):
            hits.update(index[clue])
    return [PROVIDER_RULES[n] for n in sorted(hits)]


def _preview(secret: str) -> str:
    return secret[:4] + "…" if len(secret) > 8 else "…"


def find_secrets(texts: Iterable[str]) -> list[str]:
    """Descriptions of the secrets found, e.g. ``"a GitHub token (ghp_…)"``."""
    found: list[str] = []
    # One search over all the texts at once: the common case (no secret) costs one pass.
    joined = "\n".join(t for t in texts if t)
    lowered = joined.lower()
    for rule in _rules_for(lowered):
        for match in rule.matches(joined):
            found.append(f"{rule.label} ({_preview(match.group(0))})")
            break
    if not found and ("=" in joined or ":" in joined
                      or any(clue in lowered for clue in CLUES)):
        for label, _, _, key in assignments(joined):
            # The key, not the start of the value: a password's first characters are secret.
            found.append(f"{label} ({key[:40]}=…)")
            break
    if not found and any(word in lowered for word in _PROSE_WORDS):
        for _ in _prose_credentials(joined):
            found.append("a credential named in prose")
            break
    return found


def redact_secrets(text: str) -> str:
    """``text`` with every secret found replaced by ``[redacted: <kind>]``: for indexed
    transcripts, which keep what was said but never a credential."""
    lowered = text.lower()
    for rule in _rules_for(lowered):
        spans = [(m.start(), m.end()) for m in rule.matches(text)]
        for start, end in reversed(spans):
            text = f"{text[:start]}[redacted: {rule.label}]{text[end:]}"
    if "=" in text or ":" in text or any(clue in lowered for clue in CLUES):
        for label, start, end, _ in reversed(list(assignments(text))):
            text = f"{text[:start]}[redacted: {label}]{text[end:]}"
    if any(word in text.lower() for word in _PROSE_WORDS):
        for start, end in reversed(list(_prose_credentials(text))):
            text = f"{text[:start]}[redacted: a credential named in prose]{text[end:]}"
    return text
