"""Credential assignments: the rule of :mod:`memdir.core.secrets` that reads ``KEY=value``.

An assignment is found from its separator (``=``, ``:``, ``:=``, ``=>``, or " is " / " to "
after a credential word): the key is read backwards from it and the value forwards. Then:

- a key that *names* a credential, the credential word being its last noun
  (``PASSWORD``, ``MYSQL_ROOT_PASSWORD``, ``db_password``, ``api_secret``, ``GITHUB_TOKEN``,
  ``SECRET_KEY``, ``apiKey``; not ``token_count``, ``max_tokens``, ``password_policy``), holding
  a literal value, is a secret whatever the value's entropy (``PASSWORD=hunter``). A literal
  is not a placeholder (``changeme``, ``xxx``, ``***``, ``<...>``, ``your_password_here``,
  ``REDACTED``, empty), a reference (``${X}``, ``$X``, ``{{ x }}``, ``var.db_password``,
  ``env.DB_PASSWORD``, ``os.environ[...]``, an identifier such as ``DB_PASSWORD`` or
  ``hashedPassword``), a number or boolean, a type (``str``, ``SecretStr``), a path or URL,
  nor the first word of a sentence ("secret: rotated monthly"). With ``:`` the key must start
  its line (a YAML or JSON key, not "Next token: EOF"); with a spaced ``=`` or ``:`` a bare
  value followed by more words is prose;
- any other key holding a credential word (``auth``, ``cookie``, ``dsn``, ...) needs a value
  shaped like a password: at least 8 characters, letters with digits or symbols, or a long
  random-looking one;
- any other key at all needs a long random value (at least 24 characters, 4 bits of entropy a
  character) that is not base64 of text, and not under a key for digests or ids.

Costs one scan for the separators; regexes compile on first use.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Iterator
from functools import cache

from memdir.core.secret_rules import looks_random, strong_password

__all__ = ["CLUES", "INNER_ASSIGNMENT", "PLACEHOLDER", "assignments", "regex",
           "shannon_entropy"]

# Words that make a key name a credential's. Matched inside the whole key (``DB_PASSWORD``,
# ``awsSecretAccessKey``): no word boundary, which an underscore or camel case would remove.
_CREDENTIAL_WORDS = (
    "password", "passwd", "passphrase", "pass", "pwd", "secret", "token", "apikey", "api_key",
    "api-key", "accesskey", "access_key", "access-key", "privatekey", "private_key",
    "credential", "auth", "accountkey", "signingkey", "signing_key", "masterkey",
    "master_key", "encryptionkey", "encryption_key", "sas", "sig", "dsn", "cookie", "session_key",
)
#: Lower-cased substrings one of which any credential assignment holds.
CLUES = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "sig", "dsn",
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

#: A value that stands for a credential without being one.
PLACEHOLDER = (
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

# The last word of a key that names a credential by itself ("DB_PASSWORD", "apiSecret"), a
# run-together last word ending so ("mysqlpassword", "authtoken"), and the words before a
# last word "key" that make it a secret key ("SECRET_KEY", "apiKey", "PRIVATE_KEY").
_NAMED_LAST = frozenset({"password", "passwd", "passphrase", "pass", "pwd", "secret", "token"})
_NAMED_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "secretkey")
_NAMED_BEFORE_KEY = ("secret", "api", "private", "access", "master", "signing", "encryption")
_KEY_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_NAMED_CLUE = "pass|pwd|secret|token|key"
# Values that say something about a credential rather than being one.
_NOT_A_VALUE = frozenset({
    "yes", "no", "on", "off", "none", "null", "nil", "true", "false", "empty", "blank", "unset",
    "default", "auto", "manual", "enabled", "disabled", "required", "optional", "expired",
    "revoked", "invalid", "valid", "missing", "present", "absent", "unknown", "pending",
    "rotated", "generated", "random", "encrypted", "hashed", "hidden", "masked", "sensitive",
    "secret", "password", "passwd", "pass", "token", "prompt", "stdin", "keyring", "keychain",
    "vault", "inherit", "string", "text", "char", "varchar", "bytes", "secretstr",
    "secretbytes", "any", "object", "bool", "boolean", "int", "integer", "float", "number",
    "list", "dict", "array", "uuid", "bearer", "basic", "oauth", "oauth2", "jwt", "opaque",
    "sha256", "bcrypt", "argon2", "scrypt", "pbkdf2", "plain", "plaintext", "wrong", "bad",
    "bogus", "incorrect", "correct",
})
# What a reference's dotted path starts with: Terraform, Helm, CI, config objects, code.
_NAMESPACES = frozenset({
    "var", "vars", "local", "locals", "module", "data", "env", "secrets", "secret", "self",
    "this", "settings", "config", "cfg", "conf", "configuration", "os", "process", "params",
    "props", "ctx", "context", "args", "opts", "options", "inputs", "input", "values", "app",
    "request", "req", "credentials", "creds", "auth", "user", "account", "db", "database",
    "keyring", "vault", "spec", "parameters", "steps", "needs", "github", "matrix", "runner",
})
_CREDENTIAL_IN = r"pass|pwd|secret|token|key|cred"
_DOTTED = r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+"
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
# A line's start before a YAML or JSON key: indentation, a list marker, a brace, a comma.
_KEY_STARTS_LINE = r"(?:^|[\n{,(\[])[ \t]*(?:[-*+][ \t]+)?(?:export[ \t]+)?[\"']?$"


@cache
def regex(source: str) -> re.Pattern[str]:
    """Compiled on first use (case-insensitive), so importing the detector costs a hook
    nothing."""
    return re.compile(source, re.IGNORECASE)


def shannon_entropy(text: str) -> float:
    """Bits of entropy a character of ``text`` (0 for the empty string)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _credential_key(key: str) -> bool:
    lowered = key.lower()
    if not regex("|".join(_CREDENTIAL_WORDS)).search(lowered):
        return False  # the common case ("Kevin said:", "Note:"), in one search
    if (regex(_NOT_SECRET_KEYS).search(lowered)
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


def _named_credential(key: str, sep: str) -> bool:
    """The key's last noun is a credential: "MYSQL_ROOT_PASSWORD", "apiSecret",
    "GITHUB_TOKEN", "SECRET_KEY", "dbpassword"; not "token_count", "max_tokens",
    "password_policy", "tokens". "pass" and "pwd" count alone only in capitals or before
    "=" ("PWD: x", "pwd=x"; not the English word: "First pass: dedupe")."""
    if not regex(_NAMED_CLUE).search(key):
        return False
    words = [w.lower() for w in _KEY_WORDS.findall(key)]
    while words and words[-1].isdigit():
        words.pop()  # "PASSWORD2"
    if not words:
        return False
    last = words[-1]
    if last in ("pass", "pwd"):
        return len(words) > 1 or key.isupper() or sep != ":"
    if last in _NAMED_LAST or last.endswith(_NAMED_ENDINGS):
        return True
    return last == "key" and len(words) > 1 and words[-2].endswith(_NAMED_BEFORE_KEY)


def _reference(value: str) -> bool:
    """A name that stands for the credential: a dotted path from a known namespace or naming
    a credential ("var.db_password", "env.DB_PASSWORD", "cfg.token"), or an identifier naming
    one ("DB_PASSWORD", "db_password", "hashedPassword")."""
    if regex(_DOTTED).fullmatch(value):
        return (value.split(".", 1)[0].lstrip("$").lower() in _NAMESPACES
                or regex(_CREDENTIAL_IN).search(value) is not None)
    if regex(_IDENTIFIER).fullmatch(value) and regex(_CREDENTIAL_IN).search(value):
        return "_" in value or value.isupper() or re.search("[a-z][A-Z]", value) is not None
    return False


def _named_literal(value: str, key: str, quoted: bool) -> bool:
    """Whether ``value`` is a literal, so a secret under a key naming a credential."""
    if len(value) < 4 or value.lower() == key.lower() or value.lower() in _NOT_A_VALUE:
        return False
    if re.fullmatch(r"[\d\s.,:_+-]+", value) or value[-1] in "_-":
        return False  # a number, a time, a version; an issuer's prefix ("sk_live_")
    if regex(PLACEHOLDER).search(value) or (not quoted and (
            " " in value or any(c in value for c in "()[]{}"))):
        return False  # a template, a call or an index, a phrase
    if re.match(r"[a-z][a-z0-9+.-]*://", value, re.IGNORECASE) or value.count("/") > 1:
        return False  # a URL or a path: the URL rules judge a password in a URL
    return quoted or not regex(_DOTTED).fullmatch(value)  # unquoted a.b.c is code


INNER_ASSIGNMENT = (  # a value that is itself an assignment: "credentials: AWS_PROFILE=x"
    # (case-sensitive: a random password may hold "=" after a few letters, "u_zR=Bs3…")
    r"(?-i:[A-Z][A-Z0-9]+_[A-Z0-9_]+|[a-z]{2,}_[a-z_]+)=(?!=)")


def _assigned_secret(key: str, sep: str, value: str, *, quoted: bool = False,
                     named: bool = False) -> bool:
    """Whether ``value``, assigned to ``key``, is a literal credential; ``named``: the key
    names a credential and the assignment stands where a literal is meant (see
    :func:`assignments`), so any literal is one."""
    padded = quoted and value != value.strip()  # the quotes of code around it, not its own
    value = value.strip().rstrip(".,;)")        # ('"TOKEN=" + make("x")')
    if not named and len(value) < 6:
        return False  # (the common case, first)
    if regex(INNER_ASSIGNMENT).match(value) or _reference(value):
        return False  # the inner assignment is judged on its own; a name is no credential
    if (named and not padded and value.count(" ") <= 1
            and _named_literal(value.rstrip("]}"), key, quoted)):
        return True
    if len(value) < 6 or value.lower() == key.lower():
        return False
    if re.fullmatch(r"[a-z]+(?:[_-][a-z0-9]+)*[_-]", value):
        return False  # an issuer's prefix with no token after it ("sk_live_", "dop_v1_")
    if regex(PLACEHOLDER).search(value) and not (
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
            or regex(_NOT_SECRET_KEYS).search(key)):
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


def _key_before(text: str, end: int) -> tuple[str, int]:
    """The key that ends just before ``end`` (spaces and one quote skipped), or "", and
    where it starts."""
    i = end
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    if i > 0 and text[i - 1] in "\"'":
        i -= 1
    start = i
    while start > 0 and i - start < _MAX_KEY and text[start - 1] in _KEY_CHARS:
        start -= 1
    key = text[start:i].lstrip(".-0123456789")
    return (key, i - len(key)) if key and len(key) < _MAX_KEY else ("", i)


def _literal_place(text: str, sep: str, key_start: int, bare_end: int | None) -> bool:
    """Whether the assignment stands where a literal is meant: ``=``, ``:=``, ``=>`` or ``:``
    (not a comparison, not prose), a bare value not followed by more words ("secret: rotated
    monthly"), a ``:`` key starting its line (YAML, JSON; not "Next token: EOF").
    ``bare_end``: where a bare value ends (None: the value is quoted)."""
    if sep[0] == " " or sep == "==":
        return False  # " is ", " to ": prose; "==": a comparison
    if sep == ":" and not regex(_KEY_STARTS_LINE).search(text, max(0, key_start - 80),
                                                         key_start):
        return False
    # A bare word then more words is prose, or a command line ("NEXTAUTH_SECRET=openssl rand
    # -base64 32"); a weak password before a command ("PGPASSWORD=x psql") goes with it.
    return not (bare_end is not None
                and regex(r"[ \t]+[A-Za-z]").match(text, bare_end) is not None)


def assignments(text: str) -> Iterator[tuple[str, int, int, str]]:
    """(label, start, end, key) of each assigned value that is a literal credential."""
    symbols = ((m.start(), m.end(), m.group(0)) for m in regex(_SEPARATOR).finditer(text))
    lowered = text.lower()
    prose = any(clue in lowered for clue in CLUES)
    words = ((m.start("word"), m.end("word"), f" {m.group('word')} ")
             for m in (regex(_PROSE_SEPARATOR).finditer(text) if prose else ()))
    for start, end, sep in heapq.merge(symbols, words):
        key, key_start = _key_before(text, start)
        if not key or (sep[0] == " " and not _credential_key(key)):
            continue
        before = key_start - 1
        if sep == ":" and before > 0 and text[before] == ":" and text[before - 1] in _KEY_CHARS:
            continue  # a field of a colon-separated name ("arn:aws:…:secret:prod/db"), not a key
        value = regex(_VALUE).match(text, end)
        if value is None:
            continue
        group = next(g for g in ("dq", "sq", "bare") if value.group(g) is not None)
        literal = value.group(group)
        if group == "bare":  # a URL's query: "page=2&sort=price" assigns "2", not the rest
            literal = re.split(r"&(?=[\w.-]+=)", literal, maxsplit=1)[0]
        named = _named_credential(key, sep) and _literal_place(
            text, sep, key_start, value.end() if group == "bare" else None)
        if _assigned_secret(key, sep, literal, quoted=group != "bare", named=named):
            label = ("a password or key assignment" if _credential_key(key)
                     else "a high-entropy value")
            yield label, value.start(group), value.start(group) + len(literal), key
