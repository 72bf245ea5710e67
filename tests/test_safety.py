"""Write-time safety: every kind of secret is refused by name, without echoing it."""

from __future__ import annotations

import os

import pytest

from conftest import CLI
from memdir import Memdir, SecretDetectedError
from memdir.core.errors import InvalidMemoryError
from memdir.core.safety import find_secrets, strip_private

SECRETS = {
    "a private key block": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n",
    "an AWS access key id": "key AKIAIOSFODNN7EXAMPL3 for prod",
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
    ("an AWS access key id", "ASIAIOSFODNN7EXAMPL3"),
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
    memory.path.write_text(original.replace("ci-bot", "ci-bot with AKIAIOSFODNN7EXAMPL3"))
    problems = md.doctor()
    assert [(p.kind, p.where) for p in problems] == [("secret", str(memory.path))]
    assert "AWS access key" in problems[0].message
    assert "AKIAIOSFODNN7EXAMPL3" not in problems[0].message


TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.mark.parametrize("meta", [
    {"notes": [{"ci": TOKEN}]},  # a mapping inside a list
    {"notes": [["x", [TOKEN]]]},  # a list inside a list
    {"tokens": {TOKEN: "ci"}},  # a mapping key
    {"deep": {"a": {"b": {"c": [{"d": TOKEN}]}}}},
])
def test_a_secret_anywhere_in_meta_is_refused(md: Memdir, meta: dict[str, object]) -> None:
    with pytest.raises(SecretDetectedError) as err:
        md.store("CI notes", type="fact", meta=meta)
    assert "a GitHub token" in str(err.value) and TOKEN not in str(err.value)
    assert md.stats().total == 0


def test_meta_nested_too_deeply_is_refused_with_a_hint(md: Memdir) -> None:
    deep: object = "bottom"
    for _ in range(600):
        deep = [deep]
    with pytest.raises(InvalidMemoryError) as err:
        md.store("Deep meta", type="fact", meta={"k": deep})
    assert "levels deep" in err.value.message and err.value.hint
    md.store("Shallow meta", type="fact", meta={"k": [[["fine"]]]})
    assert md.stats().total == 1


@pytest.mark.parametrize("field", ["content", "name", "tags", "meta"])
def test_text_that_is_not_valid_unicode_is_refused_with_a_hint(md: Memdir, field: str) -> None:
    bad = "caf\udce9 opens at nine"  # the byte 0xE9 of Latin-1, decoded with surrogateescape
    kwargs: dict[str, object] = {"content": "The café opens at nine", "type": "fact"}
    kwargs[field] = {"k": bad} if field == "meta" else [bad] if field == "tags" else bad
    with pytest.raises(InvalidMemoryError) as err:
        md.store(**kwargs)  # type: ignore[arg-type]
    assert "not valid Unicode" in err.value.message and "UTF-8" in (err.value.hint or "")
    assert md.stats().total == 0


def test_the_cli_refuses_non_utf8_content_with_a_hint(cli: CLI) -> None:
    result = cli("store", "--type", "fact", os.fsdecode(b"caf\xe9 opens at nine"))
    assert result.returncode == 2, result.stderr
    assert "not valid Unicode" in result.stderr and "UTF-8" in result.stderr
    assert "internal error" not in result.stderr
