"""The secret detector: provider token formats, credential assignments, high-entropy values.

Three kinds of rule, each a :class:`Rule` (a label, the lower-cased substrings a match cannot
do without, a regex, and an optional check of the matched value):

- provider formats (:data:`memdir.secret_rules.PROVIDER_RULES`): a token whose shape names its
  issuer (``ghp_…``, ``xoxb-…``, ``AKIA…``, ``SG.….…``, a private key block, a URL with a
  password in it), about 70 issuers, learnt from the public formats that secret scanners use;
- a credential assignment: a key whose name holds a credential word (``DB_PASSWORD=``,
  ``"apiKey":``, ``export AWS_SECRET_ACCESS_KEY=``, ``password is``) with a literal value that
  is not a placeholder, a reference (``${X}``, ``os.environ[...]``), a path or a plain word;
- an entropy check for any other assignment: a long value that looks random (mixed letters
  and digits, at least 4 bits of entropy a character) and is not a hash of a known kind.

Invariants:
- The common case costs a few C-speed substring scans: a rule's regex runs only on text that
  holds one of its clues, and nothing here imports more than ``re`` and ``math``.
- Findings name the kind of secret and show a redacted preview, never the secret.
- Benign look-alikes stay allowed: paths, branch names (``sk-1234-fix-login``), git SHAs,
  UUIDs, lockfile hashes, placeholders (``<your-api-key>``, ``changeme``, ``${DB_PASSWORD}``)
  and prose about secrets. ``bench/secrets.py`` measures both sides on a labelled corpus.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from functools import cache

from memdir.secret_rules import PROVIDER_RULES, Rule, looks_random

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

# A key (optionally ``export``-ed, quoted, or a field of an object), a separator, a value.
_KEY = r"(?:export\s+|set\s+|\$env:)?[\"']?(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,60})[\"']?"
_SEP = r"\s*(?P<sep>:=|=>|==|=|:|\s+is\s+|\s+to\s+)\s*"
_VALUE = r"(?:\"(?P<dq>[^\"\n]{1,300})\"|'(?P<sq>[^'\n]{1,300})'|(?P<bare>[^\s\"'`,;]{1,300}))"
_ASSIGNMENT = rf"(?<![A-Za-z0-9_]){_KEY}{_SEP}{_VALUE}"

_PLACEHOLDER = (
    # ${X}, %(x)s, <your-key>, {{x}}, paths, references
    r"^(?:\$|%[({]|%s$|%\w+%$|<|\{|\[|\(|@|&|\*|`|#|~|/|\.{1,2}/|\\)"
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
    r"expiry|header|prefix|env|var|field|format)$"
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
    return any(word in lowered for word in _CREDENTIAL_WORDS) and not lowered.endswith(
        ("_file", "_path", "_env", "_name", "_url_template", "_id", "_length", "_header"))


def _assigned_secret(key: str, sep: str, value: str) -> bool:
    """Whether ``value``, assigned to ``key``, is a literal credential."""
    value = value.strip().rstrip(".,;)")
    if len(value) < 6 or _regex(_PLACEHOLDER).search(value) or value.lower() == key.lower():
        return False
    if any(c in value for c in "()[]{}") or value.count(" ") > 1:
        return False  # a call, an index, a template or a sentence
    if value.count("/") > 1 and not looks_random(value, 16, 3.0):
        return False  # a path ("prod/db/password"), not base64 that holds slashes
    digits = sum(c.isdigit() for c in value)
    letters = sum(c.isalpha() for c in value)
    symbols = len(value) - digits - letters
    if _credential_key(key):
        prose = sep.strip().lower() in ("is", "to")
        if prose and (len(value) < 8 or not (digits and letters)):
            return False  # "the password is rotated weekly", "set the token to expire"
        if len(value) >= 8 and letters and (digits or symbols):
            return True
        return len(value) >= 12 and shannon_entropy(value) >= 3.5 and not value.isalpha()
    if (sep.strip().lower() in ("is", "to") or " " in value
            or _regex(_NOT_SECRET_KEYS).search(key)):
        return False
    return looks_random(value, 24, 4.0)


def _assignments(text: str) -> Iterable[tuple[str, re.Match[str]]]:
    for match in _regex(_ASSIGNMENT).finditer(text):
        value = match.group("dq") or match.group("sq") or match.group("bare") or ""
        key, sep = match.group("key"), match.group("sep")
        if _assigned_secret(key, sep, value):
            label = ("a password or key assignment" if _credential_key(key)
                     else "a high-entropy value")
            yield label, match


# Every (clue, rule) pair, flat: one pass of C-speed substring tests picks the rules to run.
_CLUES = tuple((clue, n) for n, rule in enumerate(PROVIDER_RULES) for clue in rule.clues)


def _rules_for(lowered: str) -> list[Rule]:
    hits = {n for clue, n in _CLUES if clue in lowered}
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
        for match in rule.pattern.finditer(joined):
            if rule.check is None or rule.check(match.group(0)):
                found.append(f"{rule.label} ({_preview(match.group(0))})")
                break
    if not found and ("=" in joined or ":" in joined
                      or any(clue in lowered for clue in _CLUES_ASSIGN)):
        for label, match in _assignments(joined):
            value = match.group("dq") or match.group("sq") or match.group("bare") or ""
            found.append(f"{label} ({_preview(value)})")
            break
    return found


def redact_secrets(text: str) -> str:
    """``text`` with every secret found replaced by ``[redacted: <kind>]``: for indexed
    transcripts, which keep what was said but never a credential."""
    lowered = text.lower()
    for rule in _rules_for(lowered):
        text = rule.pattern.sub(
            lambda m, r=rule: m.group(0) if r.check and not r.check(m.group(0))  # type: ignore[misc]
            else f"[redacted: {r.label}]", text)
    if "=" in text or ":" in text or any(clue in lowered for clue in _CLUES_ASSIGN):
        spans = [(m.start(g), m.end(g), label) for label, m in _assignments(text)
                 for g in ("dq", "sq", "bare") if m.group(g)]
        for start, end, label in reversed(spans):
            text = f"{text[:start]}[redacted: {label}]{text[end:]}"
    return text
