"""Write-time safety: every kind of secret is refused by name, without echoing it."""

from __future__ import annotations

import pytest

from memdir import Memdir, SecretDetectedError
from memdir.safety import find_secrets, strip_private

SECRETS = {
    "a private key block": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n",
    "an AWS access key id": "key AKIAIOSFODNN7EXAMPLE for prod",
    "an Anthropic API key": "ANTHROPIC sk-ant-api03-abcdefghijklmnopqrstuvwx",
    "an OpenAI-style API key": "use sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "a GitHub token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "a GitLab token": "glpat-abcdefghij0123456789",
    "a Slack token": "xoxb-123456789012-abcdefghij",
    "a Google API key": "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
    "a Stripe key": "sk_live_abcdefghijklmnop1234",
    "a JSON Web Token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
    "a bearer token": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
    "a URL with credentials": "DATABASE_URL=postgres://admin:hunter22@db.internal:5432/app",
    "a password or key assignment": "the password=Sup3rSecret! for the admin",
}

# Other spellings of the same kinds: each must pass the cheap substring check that decides
# whether a pattern runs at all.
MORE_SECRETS = [
    ("a GitHub token", "gho_" + "a1B2c3" * 6),
    ("a GitHub token", "ghs_" + "Zz9" * 12),
    ("a GitHub token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
    ("a Stripe key", "rk_test_ABCDEFGHIJKLMNOP1234"),
    ("a bearer token", "BEARER abcdefghijklmnopqrstuvwxyz012345"),
    ("a password or key assignment", "PASSWD: hunter2hunter2"),
    ("a password or key assignment", "apiKey = 'a8f5f167f44f4964e6c998dee827110c'"),
    ("an AWS access key id", "ASIAIOSFODNN7EXAMPLE"),
]


@pytest.mark.parametrize(("label", "text"), [*SECRETS.items(), *MORE_SECRETS])
def test_each_secret_kind_is_found_and_named(label: str, text: str) -> None:
    found = find_secrets([text])
    assert any(f.startswith(label) for f in found), found


@pytest.mark.parametrize("text", [
    "Passwords must be rotated every 90 days",
    "the api_key is read from os.environ['API_KEY']",
    "token: ${GITHUB_TOKEN} comes from the CI secret store",
    "Connect with postgres://db.internal:5432/app (no credentials in the URL)",
    "We use sk-learn? no: scikit-learn",
    "Use a bearer token from the auth service",
    "password is in 1Password under 'prod db'",
])
def test_ordinary_sentences_about_secrets_are_allowed(text: str) -> None:
    assert find_secrets([text]) == []


def test_refusal_names_the_secret_but_never_prints_it(md: Memdir) -> None:
    secret = "ghp_" + "Zx9" * 12
    for field in ("content", "name", "description", "tags", "meta"):
        kwargs: dict[str, object] = {"content": "A normal memory", "type": "fact"}
        if field == "tags":
            kwargs["tags"] = [secret]
        elif field == "meta":
            kwargs["meta"] = {"note": secret}
        else:
            kwargs[field] = f"value {secret}"
        with pytest.raises(SecretDetectedError) as info:
            md.store(**kwargs)  # type: ignore[arg-type]
        assert "GitHub token" in str(info.value) and secret not in str(info.value)
        assert "secret manager" in info.value.hint
    assert md.stats().total == 0
    assert not md.directory("project").path.exists() or not list(
        md.directory("project").path.glob("*_*.md"))


def test_private_spans() -> None:
    assert strip_private("a <private>b</private> c <PRIVATE>d\ne</PRIVATE> f") == "a  c  f"
    assert strip_private("keep <private>unclosed secret") == "keep "
    assert strip_private("nothing private") == "nothing private"


def test_a_secret_inside_private_is_stripped_not_refused(md: Memdir) -> None:
    memory = md.store("Prod DB <private>postgres://u:pw12345@h/db</private> is Postgres 16",
                      type="fact")
    assert memory.body == "Prod DB  is Postgres 16"


def test_doctor_finds_a_secret_written_into_a_file_by_hand(md: Memdir) -> None:
    memory = md.store("The deploy user is ci-bot", type="fact")
    assert memory.path is not None
    original = memory.path.read_text()
    memory.path.write_text(original.replace("ci-bot", "ci-bot with AKIAIOSFODNN7EXAMPLE"))
    problems = md.doctor()
    assert [(p.kind, p.where) for p in problems] == [("secret", str(memory.path))]
    assert "AWS access key" in problems[0].message
    assert "AKIAIOSFODNN7EXAMPLE" not in problems[0].message
