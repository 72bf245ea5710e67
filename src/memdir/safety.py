"""Write-time safety: secrets are refused, ``<private>…</private>`` is stripped.

Every write path (store, update, import, extraction) calls :func:`check_secrets` on every
text it is about to write, after :func:`strip_private`. Findings name the kind of secret and
show only a redacted preview, never the secret itself (error messages end up in logs).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memdir.errors import SecretDetectedError

__all__ = ["check_secrets", "find_secrets", "redact_secrets", "strip_private"]

_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.IGNORECASE | re.DOTALL)

_ASSIGN_KEYS = (
    r"password|passwd|passphrase|pwd|secret|client[_-]?secret|api[_-]?key|apikey|"
    r"access[_-]?key|secret[_-]?key|auth[_-]?token|access[_-]?token|token|private[_-]?key"
)

# Each pattern with the lower-cased substrings it cannot match without. Checking for them is
# a few C-speed scans, so a regex only runs on the rare text that could hold its secret.
_PATTERNS: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    ("a private key block", ("-----begin",),
     re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("an AWS access key id", ("akia", "asia", "agpa", "aida", "aroa"),
     re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("an Anthropic API key", ("sk-ant-",), re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("an OpenAI-style API key", ("sk-",),
     re.compile(r"\bsk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}")),
    ("a GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
     re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")),
    ("a GitLab token", ("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", ("xox",), re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("a Google API key", ("aiza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Stripe key", ("_live_", "_test_"),
     re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}")),
    ("a JSON Web Token", ("eyj",),
     re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("a bearer token", ("bearer",), re.compile(r"\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*", re.I)),
    (
        "a URL with credentials", ("://",),
        re.compile(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@'\"]+:[^\s@/'\"]{2,}@[^\s/'\"]+", re.I),
    ),
    (
        "a password or key assignment", ("pass", "pwd", "secret", "key", "token"),
        re.compile(
            rf"(?i)\b(?:{_ASSIGN_KEYS})\b\s*(?:=|:|\bis\b)\s*['\"]?"
            r"(?![$<{(%])(?=[^\s'\"]*\d)[^\s'\"(){}\[\]<>]{8,}"
        ),
    ),
)


def strip_private(text: str) -> str:
    """Remove every ``<private>…</private>`` span (an unclosed one runs to the end)."""
    if "<private" not in text.lower():
        return text
    return _PRIVATE.sub("", text)


def _preview(secret: str) -> str:
    return secret[:4] + "…" if len(secret) > 8 else "…"


def find_secrets(texts: Iterable[str]) -> list[str]:
    """Descriptions of the secrets found, e.g. ``"a GitHub token (ghp_…)"``."""
    found: list[str] = []
    # One search over all the texts at once: the common case (no secret) costs one pass.
    joined = "\n".join(t for t in texts if t)
    lowered = joined.lower()
    for label, clues, pattern in _PATTERNS:
        if not any(clue in lowered for clue in clues):
            continue
        match = pattern.search(joined)
        if match:
            found.append(f"{label} ({_preview(match.group(0))})")
    return found


def redact_secrets(text: str) -> str:
    """``text`` with every secret found replaced by ``[redacted: <kind>]``: for indexed
    transcripts, which keep what was said but never a credential."""
    lowered = text.lower()
    for label, clues, pattern in _PATTERNS:
        if any(clue in lowered for clue in clues):
            text = pattern.sub(f"[redacted: {label}]", text)
    return text


def check_secrets(texts: Iterable[str]) -> None:
    found = find_secrets(texts)
    if found:
        raise SecretDetectedError(found)
