"""Secrets that leaked through the detector (issue 28): a literal under a key that names a
credential, however weak (``PASSWORD=hunter``), a Basic Authorization header in any case,
an Airtable personal access token, a short HashiCorp Vault token. And their look-alikes stay
storable: references (``var.db_password``, ``${X}``, ``{{ secrets.X }}``), placeholders,
types, numbers and booleans, keys where the credential word is not the last noun
(``token_count``, ``max_tokens``, ``password_policy``), prose.

Tokens are built at run time from a seeded generator: no live-looking key sits in the
repository.
"""

from __future__ import annotations

import base64
import random
import string
from pathlib import Path

import pytest

from conftest import CLI
from memdir import Memdir, SecretDetectedError
from memdir.core.safety import find_secrets, redact_secrets

_R = random.Random(28)


def _pick(alphabet: str, n: int) -> str:
    return "".join(_R.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- a literal under a key naming a credential -------------------------------------------------

NAMED = {
    "env, 6 letters": "PASSWORD=hunter",
    "env, lower-case letters": "PASSWORD=lowercaseletters",
    "env, 10 letters, prefixed key": "MYSQL_ROOT_PASSWORD=abcdefghij",
    "yaml, quoted": 'db_password: "mypassword"',
    "yaml, nested": "database:\n  user: app\n  password: postgres\n",
    "compose": "environment:\n  POSTGRES_PASSWORD: postgres",
    "json": '{"api_secret": "xkcdcorrecthorse", "user": "ci"}',
    "export": "export GITHUB_TOKEN=abcdefghijklmnop",
    "python, quoted": "password = 'opensesame'",
    "ini, spaced": "[client]\npassword = letmein",
    "with a comment": "password: hunter2 # dev only",
    "short key": "pwd=opensesame",
    "capitals pass": "RABBITMQ_DEFAULT_PASS=guest",
    "secret key": "SECRET_KEY = 'django'",
    "camel case": "apiKey: 'abcdefgh'",
    "powershell": "$env:API_TOKEN = 'monkeybusiness'",
    "numbered key": "PASSWORD2=dragonfly",
    "query string": "https://api.example.com/v1/items?token=abc123def&page=2",
    "option": "mytool --password=hunter",
    "list item": "- auth_token: abcdefg",
}


@pytest.mark.parametrize("text", NAMED.values(), ids=NAMED.keys())
def test_a_literal_under_a_credential_key_is_a_secret_whatever_its_entropy(text: str) -> None:
    found = find_secrets([text])
    assert found, text
    assert all("hunter" not in f and "postgres" not in f for f in found)  # key, not value


# -- provider formats --------------------------------------------------------------------------

def _airtable() -> str:
    return "pat" + _pick(ALNUM, 14) + "." + _pick(HEX, 64)


PROVIDERS = {
    "airtable, alone": _airtable(),
    "airtable, in prose": f"the sync job reads the base with {_airtable()} since May",
    "airtable, env": f"AIRTABLE_API_KEY={_airtable()}",
    "vault service token, 24": "vault login hvs." + _pick(ALNUM, 24),
    "vault service token, 20": "use hvs." + _pick(ALNUM, 20) + " for the migration",
    "vault batch token": "token hvb." + _pick(ALNUM, 24) + " expires soon",
    "vault recovery token": "recovery: hvr." + _pick(ALNUM, 26),
    "basic header": "Authorization: Basic " + _b64("admin:" + _pick(string.ascii_lowercase, 6)),
    "basic header, lower case": "authorization: basic " + _b64("ci-bot:" + _pick(ALNUM, 12)),
    "basic header, capitals": "AUTHORIZATION: BASIC " + _b64("deploy:hunter"),
    "basic header, very short": "-H 'Authorization: Basic " + _b64("a:b") + "'",
    "basic header, json": '{"headers": {"Authorization": "Basic ' + _b64("u:pw1") + '"}}',
}


@pytest.mark.parametrize("text", PROVIDERS.values(), ids=PROVIDERS.keys())
def test_provider_tokens_that_leaked_are_found(text: str) -> None:
    assert find_secrets([text]), text


# -- look-alikes ---------------------------------------------------------------------------------

LOOKALIKES = [
    # references
    "password = var.db_password", "password: env.DB_PASSWORD", "PASSWORD=${DB_PASSWORD}",
    "password=$DB_PASSWORD", "token: {{ secrets.TOKEN }}", 'password = os.environ["X"]',
    "token: ${{ secrets.GITHUB_TOKEN }}", "password: {{ .Values.db.password }}",
    "token = next_token", "password = hashed_password", "{ password: hashedPassword }",
    "Password: cfg.Password,", 'Token: os.Getenv("TOKEN"),', "connect(password=db_pass)",
    "password=$(cat /run/secrets/db)", "password: !vault |", "password = getpass()",
    "token = tokenizer.encode(text)",
    # placeholders and empty values
    "password=<your-password>", "PASSWORD=changeme", "password: xxx", "password: ***",
    "password=your_password_here", "password: REDACTED", "password=", 'password: ""',
    "token: ''", "password: ~", "password: '********'", "PASSWORD=xxxxxxxx",
    "api_key: YOUR_API_KEY",
    # types, numbers, booleans, other nouns
    "token_count = 5", "max_tokens: 1024", "password_min_length = 12", "secret_santa = true",
    "password_policy: strict", "token_type: bearer", "password_hash: bcrypt", "token: str",
    "password: SecretStr", "secret: bool", "password: Optional[str] = None", "password: 12345",
    "pin: 1234", "token_ttl: 3600", "password: null", "session_token: null", "auth: none",
    "tokens: 5", "bypass: cache", "compass: north", "passwords: []",
    # paths and URLs
    "POSTGRES_PASSWORD_FILE=/run/secrets/db", "password: /run/secrets/db_password",
    "token_url: https://auth.example.com/oauth/token",
    # code that compares, prose
    'if token == "before":', "assert token == expected_token",
    "the password field is required", "rotate the token weekly",
    "First pass: dedupe the rows", "Next token: EOF", "Secret: rotated monthly by ops",
    "Password: required for the admin page", "password: see the vault",
    "the token is valid for 1 hour", "NEXTAUTH_SECRET=openssl rand -base64 32",
    "Basic authentication is enabled in nginx", "basic usage: memdir store",
    "Authorization: Basic realm", "pattern patAbc.def is not a token",
    "hvs. tokens are Vault service tokens",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_look_alikes_stay_storable(text: str) -> None:
    assert find_secrets([text]) == [], text


# -- every path: redaction, the library, a real CLI process --------------------------------------

def test_redaction_removes_the_weak_value_and_keeps_the_rest() -> None:
    text = "db config:\nPASSWORD=hunter\nHOST=db.internal\nusers: max_tokens: 1024"
    redacted = redact_secrets(text)
    assert "hunter" not in redacted
    assert "PASSWORD=[redacted: a password or key assignment]" in redacted
    assert "HOST=db.internal" in redacted and "max_tokens: 1024" in redacted


def test_the_library_refuses_and_stores_the_look_alikes(md: Memdir) -> None:
    for text in ("PASSWORD=hunter", 'db_password: "mypassword"',
                 "Authorization: Basic " + _b64("ops:" + _pick(ALNUM, 8)), _airtable()):
        with pytest.raises(SecretDetectedError) as err:
            md.store(text, type="fact")
        assert "hunter" not in str(err.value) and "mypassword" not in str(err.value)
    for text in ("password = var.db_password", "max_tokens: 1024", "PASSWORD=${DB_PASSWORD}"):
        md.store(f"Deploy note: {text}", type="fact")
    assert len(md.list()) == 3


def test_the_cli_refuses_a_weak_literal(cli: CLI, home: Path) -> None:
    result = cli("store", "--type", "fact", "MYSQL_ROOT_PASSWORD=abcdefghij")
    assert result.returncode == 2 and "secret" in result.stderr, result.stderr
    assert "abcd" not in result.stderr + result.stdout
    assert "MYSQL_ROOT_PASSWORD=…" in result.stderr
    assert not list(home.rglob("fact_*.md"))
    allowed = cli("store", "--type", "fact", "password_min_length = 12 for all users")
    assert allowed.returncode == 0, allowed.stderr
