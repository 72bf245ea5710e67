"""Write-time safety: secrets are refused, ``<private>…</private>`` is stripped.

Every write path (store, update, import, extraction, the HTTP API on either store, MCP)
calls :func:`check_secrets` on every text it is about to write, after :func:`strip_private`.
Findings name the kind of secret and show only a redacted preview, never the secret itself
(error messages end up in logs). The detector lives in :mod:`memdir.core.secrets` (rules in
:mod:`memdir.core.secret_rules`), the private-tag stripping in :mod:`memdir.core.private`; this
module keeps the names every caller imports.
"""

from __future__ import annotations

from collections.abc import Iterable

from memdir.core.errors import SecretDetectedError
from memdir.core.private import strip_private
from memdir.core.secrets import find_secrets, redact_secrets

__all__ = ["SECRET_IN_FILE", "check_secrets", "find_secrets", "redact_secrets", "strip_private"]

# How the index records a memory file that holds a secret (``broken``), and doctor tells it.
SECRET_IN_FILE = "the file contains a secret"


def check_secrets(texts: Iterable[str]) -> None:
    """Raise :class:`SecretDetectedError` naming every kind of secret found in ``texts``."""
    found = find_secrets(texts)
    if found:
        raise SecretDetectedError(found)
