"""The secret detector: provider token formats, credential assignments, high-entropy values
and credentials named in prose.

Four kinds of rule; the first is a list of :class:`Rule` (a label, the lower-cased substrings
a match cannot do without, a regex, and an optional check of the matched value):

- provider formats (:data:`memdir.core.secret_rules.PROVIDER_RULES`): a token whose shape names its
  issuer (``ghp_…``, ``xoxb-…``, ``AKIA…``, ``SG.….…``, a private key block, a URL with a
  password in it), about 70 issuers, learnt from the public formats that secret scanners use;
- a credential assignment: a key whose name holds a credential word (``DB_PASSWORD=``,
  ``"apiKey":``, ``export AWS_SECRET_ACCESS_KEY=``, ``password is``) with a literal value that
  is not a placeholder, a reference (``${X}``, ``os.environ[...]``), a path or a plain word;
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

import heapq
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from memdir.core.secret_rules import PROVIDER_RULES, Rule, looks_random, strong_password

__all__ = ["Rule", "find_secrets", "looks_random", "redact_secrets", "shannon_entropy"]

# Words that make a key name a credential's. Matched inside the whole key (``DB_PASSWORD``,
# ``awsSecretAccessKey``): no word boundary, which an underscore or camel case would remove.
_CREDENTIAL_WORDS = (
    "password", "passwd", "passphrase", "pass", "pwd", "secret", "token", "apikey", "api_key",
    "api-key", "accesskey", "access_key", "access-key", "privatekey", "private_key",
    "credential", "auth", "accountkey", "signingkey", "signing_key", "masterkey",
    "master_key", "encryptionkey", "encryption_key", "sas", "sig", "dsn", "cookie", "session_key",
)
_CLUES_ASSIGN = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "sig", "dsn",
                 "cookie", "sas")

# An assignment is found from its separator, the one part with a literal start: the key is
# read backwards from it and the value forwards, so a long text costs one scan for "=" and
# ":" (a regex that tried a key at every position was 10x slower on a 25 KB MEMORY.md).
_SEPARATOR = r":=|=>|==|=|:"
# "the admin password is …", "set the token to …": prose, counted only after a credential
# word (checked on the key read backwards; the regex alone would try every position).
_PROSE_SEPARATOR = r"\s(?P<word>is|to)(?=\s)"
# A value starts on its key's line: "KEY=" with nothing after it assigns nothing, it does not
# take the next line's "OTHER_KEY=" for its value.
_VALUE = (r"[ \t]*(?:\"(?P<dq>[^\"\n]{1,300})\"|'(?P<sq>[^'\n]{1,300})'"
          r"|(?P<bare>[^\s\"'`,;]{1,300}))")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_MAX_KEY = 61

_PLACEHOLDER = (
    # ${X}, %(x)s, <your-key>, {{x}}, paths, references
    r"^(?:\$|%[({]|%s$|%\w+%$|<|\{|\[|\(|@|&|`|~|/|\.{1,2}/|\\)"
    r"|^(?:!vault|os\.|process\.|env\.|env\(|getenv|settings\.|config\.|self\.|vault:|secret:|ref:|"
    r"arn:|sha\d+[-:]|md5[-:]|file:|none$|null$|nil$|true$|false$|undefined$|required$|"
    r"optional$|string$|str$|bytes$|int$|redacted|hidden|masked|example|sample|placeholder|"
    r"changeme|change_me|change-me|your|my[-_]|dummy|fake|test$|testing$|xxx|todo|tbd|n/a)"
    r"|(?:x{4,}|\*{3,}|\.{3}|_here$|-here$|example|placeholder)"
)
# Keys whose values are digests or identifiers, not credentials, whatever their entropy.
_NOT_SECRET_KEYS = (
    r"(?:^|[_.\-])(?:integrity|hash|checksum|digest|sha\d*|md5|commit|rev|revision|ref|etag|"
    r"nonce|uuid|guid|id|version|resolved|branch|tag|path|dir|file|url|uri|host|name|user|"
    r"username|email|region|bucket|type|mode|length|len|size|count|timeout|ttl|expires?|"
    r"expiry|header|prefix|env|var|field|format|policy|rules?|pattern|regex|hint|reset|min|"
    r"max|strength|column|algorithm|algo|provider|domain|issuer|audience|scopes?|method|kind|"
    r"level|limit|enabled|required|suffix|label|title|text|message|template|style|"
    r"h1|blake2[bs]?|crc32|xxh\d*)(?:[_.\-]?\d+)?$"  # "x-amz-id-2", go.sum's "h1:"
)


@cache
def _regex(source: str) -> re.Pattern[str]:
    """Compiled on first use, so importing the detector costs a hook nothing."""
    return re.compile(source, re.IGNORECASE)


def shannon_entropy(text: str) -> float:
    """Bits of entropy a character of ``text`` (0 for the empty string)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _credential_key(key: str) -> bool:
    lowered = key.lower()
    if (_regex(_NOT_SECRET_KEYS).search(lowered)
            and not lowered.endswith(("key", "token", "secret"))):
        return False
    return any(_word_in(word, key, lowered) for word in _CREDENTIAL_WORDS)


def _word_in(word: str, key: str, lowered: str) -> bool:
    """``word`` ends a part of ``key``: "DB_PASSWORD", "apiKey", "accessToken" but not
    "tokenizer", "passport", "signal" (a lower-case letter right after it)."""
    start = lowered.find(word)
    while start >= 0:
        end = start + len(word)
        if end == len(key) or not key[end].islower() or (key[end] == "s" and (
                end + 1 == len(key) or not key[end + 1].islower())):
            return True
        start = lowered.find(word, start + 1)
    return False


# A value that is itself an assignment: an environment name or a snake_case key, then "="
# (case-sensitive: a random password may hold "=" after a few letters, "u_zR=Bs3…").
_INNER_ASSIGNMENT = r"(?-i:[A-Z][A-Z0-9]+_[A-Z0-9_]+|[a-z]{2,}_[a-z_]+)=(?!=)"


def _assigned_secret(key: str, sep: str, value: str, quoted: bool = False) -> bool:
    """Whether ``value``, assigned to ``key``, is a literal credential."""
    value = value.strip().rstrip(".,;)")
    if len(value) < 6 or value.lower() == key.lower():
        return False
    if re.fullmatch(r"[a-z]+(?:[_-][a-z0-9]+)*[_-]", value):
        return False  # an issuer's prefix with no token after it ("sk_live_", "dop_v1_")
    if _regex(_INNER_ASSIGNMENT).match(value):
        return False  # "credentials: AWS_PROFILE=x": the inner assignment is judged on its own
    if _regex(_PLACEHOLDER).search(value) and not (
            (value[0] == "/" and looks_random(value, 20, 3.5))  # base64 may start with "/"
            or (value[0] in "@&" and "/" not in value and strong_password(value))):
        return False  # (a password may start with "@" or "&": a reference is no such word)
    if value.count(" ") > 1 or (any(c in value for c in "()[]{}") and not (
            quoted and " " not in value and len(value) >= 16 and shannon_entropy(value) >= 4.0)):
        return False  # a call, an index, a template or a sentence; not a quoted random
        # literal, whose symbols may be brackets ('django-insecure-*ik)q5…')
    if value.count("/") > 1 and not looks_random(value, 16, 3.0):
        return False  # a path ("prod/db/password"), not base64 that holds slashes
    digits = sum(c.isdigit() for c in value)
    letters = sum(c.isalpha() for c in value)
    symbols = len(value) - digits - letters
    if _credential_key(key):
        prose = sep.strip().lower() in ("is", "to")
        if prose and not strong_password(value):
            return False  # "the password is rotated weekly", "the secret is db-creds-v2"
        if len(value) >= 8 and letters and (digits or symbols):
            return True
        # Letters alone: random only if both cases mix in a long value ("wCBdnbPMNMIIeF…"),
        # not a word ("disabled", "bearer") or a phrase run together.
        return (len(value) >= 16 and not value.islower() and not value.isupper()
                and shannon_entropy(value) >= 3.5)
    if (sep.strip().lower() in ("is", "to") or " " in value
            or _regex(_NOT_SECRET_KEYS).search(key)):
        return False
    return looks_random(value, 24, 4.0) and not _encoded_text(value)


def _encoded_text(value: str) -> bool:
    """Base64 of text (a config file, an SVG): random-looking, yet it decodes to printable
    text with spaces or markup in it, which no generated key does."""
    import base64  # only for the rare high-entropy value
    import binascii

    if not re.fullmatch(r"[A-Za-z0-9+/]{16,}={0,2}", value):
        return False
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    printable = sum(c.isprintable() or c in "\n\t" for c in decoded)
    return printable == len(decoded) and any(c in decoded for c in " <>\n")


def _key_before(text: str, end: int) -> str:
    """The key that ends just before ``end`` (spaces and one quote skipped), or ""."""
    i = end
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    if i > 0 and text[i - 1] in "\"'":
        i -= 1
    start = i
    while start > 0 and i - start < _MAX_KEY and text[start - 1] in _KEY_CHARS:
        start -= 1
    key = text[start:i].lstrip(".-0123456789")
    return key if key and len(key) < _MAX_KEY else ""


def _assignments(text: str) -> Iterator[tuple[str, int, int, str]]:
    """(label, start, end, key) of each assigned value that is a literal credential."""
    symbols = ((m.start(), m.end(), m.group(0)) for m in _regex(_SEPARATOR).finditer(text))
    lowered = text.lower()
    prose = any(clue in lowered for clue in _CLUES_ASSIGN)
    words = ((m.start("word"), m.end("word"), f" {m.group('word')} ")
             for m in (_regex(_PROSE_SEPARATOR).finditer(text) if prose else ()))
    for start, end, sep in heapq.merge(symbols, words):
        key = _key_before(text, start)
        if not key or (sep[0] == " " and not _credential_key(key)):
            continue
        before = text.rfind(key, 0, start) - 1
        if sep == ":" and before > 0 and text[before] == ":" and text[before - 1] in _KEY_CHARS:
            continue  # a field of a colon-separated name ("arn:aws:…:secret:prod/db"), not a key
        value = _regex(_VALUE).match(text, end)
        if value is None:
            continue
        group = next(g for g in ("dq", "sq", "bare") if value.group(g) is not None)
        literal = value.group(group)
        if group == "bare":  # a URL's query: "page=2&sort=price" assigns "2", not the rest
            literal = re.split(r"&(?=[\w.-]+=)", literal, maxsplit=1)[0]
        if _assigned_secret(key, sep, literal, quoted=group != "bare"):
            label = ("a password or key assignment" if _credential_key(key)
                     else "a high-entropy value")
            yield label, value.start(group), value.start(group) + len(literal), key


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
        return [m.start() for m in _regex(_PROSE_WORD).finditer(text)]
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
        word = _regex(_PROSE_WORD).match(text, at)
        if word is None:
            continue
        for form, min_len in ((_PROSE_SEP, 8), (_PROSE_NEXT, 10)):
            match = _regex(form).match(text, word.end())
            if match is None:
                continue
            value = match.group("value").rstrip(".")
            if (len(value) < min_len or _regex(_PLACEHOLDER).search(value)
                    or _regex(_INNER_ASSIGNMENT).match(value)
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


def _trie_regex(words: Iterable[str]) -> str:
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
    return re.compile(f"(?=({_trie_regex(index)}))"), index


def _rules_for(lowered: str) -> list[Rule]:
    hits = {n for clue, n in _SPACED_CLUES if clue in lowered}
    runs = " ".join(_regex(_TOKEN_RUN).findall(lowered))
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
                      or any(clue in lowered for clue in _CLUES_ASSIGN)):
        for label, _, _, key in _assignments(joined):
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
    if "=" in text or ":" in text or any(clue in lowered for clue in _CLUES_ASSIGN):
        for label, start, end, _ in reversed(list(_assignments(text))):
            text = f"{text[:start]}[redacted: {label}]{text[end:]}"
    if any(word in text.lower() for word in _PROSE_WORDS):
        for start, end in reversed(list(_prose_credentials(text))):
            text = f"{text[:start]}[redacted: a credential named in prose]{text[end:]}"
    return text
