"""The LLM layer the rest of memdir uses: settings, the provider interface, and :class:`LLM`.

The providers themselves (Anthropic, OpenAI-compatible, the ``claude`` CLI) live in
:mod:`memdir.llm.providers` and are imported only when one is configured, so the hook start
path never loads ``urllib``/``ssl`` for users without an LLM.

Invariants:
- LLM use is an explicit opt-in: the default provider is ``"none"``; an API key in the
  environment alone never starts spending money.
- API keys come only from environment variables (``config.toml`` may only *name* one) and
  never appear in a repr, a log record or an error message.
- :meth:`LLM.ask` never raises: any failure (no provider, budget spent, timeout, HTTP error,
  a reply that is not JSON or not of the schema's shape) is one warning on the ``memdir``
  logger and ``None``, and every feature falls back to rules and ranked search.
- Every attempted call is counted in the ledger; the daily budget is checked against the
  ledger (shared by all processes) before each call. Concurrent processes may overshoot it by
  at most one call each: the check and the count are not one transaction.
- No text leaves the process with a secret or a ``<private>`` span in it: :meth:`LLM.ask`,
  the one way memdir calls a model (extraction, consolidation, the recall side query), strips
  private spans and redacts secrets from the system text and the prompt before sending them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Protocol

from memdir.core.config import user_section
from memdir.core.errors import ConfigError, LLMError, warn
from memdir.llm.ledger import Ledger

__all__ = [
    "DEFAULT_MODELS",
    "LLM",
    "PROVIDERS",
    "Completion",
    "LLMError",
    "LLMSettings",
    "Provider",
    "llm_settings",
    "make_provider",
    "shape_problem",
]


PROVIDERS = ("anthropic", "openai", "claude-cli", "none")
DEFAULT_MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4o-mini", "claude-cli": "haiku"}
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
_CONFIG_KEYS = ("provider", "model", "base_url", "api_key_env", "timeout", "daily_budget",
                "claude_command")


@dataclass(frozen=True)
class LLMSettings:
    provider: str  # one of PROVIDERS
    model: str = ""  # the provider's default (DEFAULT_MODELS) when empty
    base_url: str = ""  # openai: https://api.openai.com/v1, anthropic: https://api.anthropic.com
    api_key: str = field(default="", repr=False)
    timeout: float = 10.0  # seconds, per call
    daily_budget: int = 500  # calls per local day across all processes; 0 = no LLM calls
    claude_command: str = "claude"  # split like a shell word list: "npx claude" works
    api_key_env: str = ""  # the variable the key came from, named in hints (never the key)

    @property
    def effective_model(self) -> str:
        return self.model or DEFAULT_MODELS.get(self.provider, "")


@dataclass(frozen=True)
class Completion:
    data: Any  # the parsed JSON value
    input_tokens: int = 0  # 0 when the provider does not report usage
    output_tokens: int = 0


class Provider(Protocol):
    name: str

    def complete_json(self, system: str, prompt: str, schema: dict[str, Any], *,
                      max_tokens: int = 512) -> Completion:
        """The model's reply parsed as JSON. Raises :class:`LLMError` on any failure."""
        ...


# ---------------------------------------------------------------------------------- settings

def _bad(what: str, value: object, where: str, valid: str) -> ConfigError:
    return ConfigError(f"invalid LLM setting {what} = {value!r} in {where}", f"use {valid}")


def _provider_and_model(value: object, where: str) -> tuple[str, str]:
    """``"anthropic"`` or ``"anthropic:claude-haiku-4-5"``; only the first colon splits, so
    Ollama-style models (``"openai:llama3:8b"``) keep theirs."""
    valid = (f"one of {', '.join(PROVIDERS)}, optionally with a model after a colon "
             "(e.g. anthropic:claude-haiku-4-5)")
    if not isinstance(value, str):
        raise _bad("provider", value, where, valid)
    provider, _, model = value.strip().partition(":")
    if provider not in PROVIDERS:
        raise _bad("provider", value, where, valid)
    return provider, model.strip()


def _number(value: object, what: str, where: str, *, integer: bool) -> float:
    valid = "a whole number >= 0" if integer else "a number of seconds > 0"
    if isinstance(value, str):
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            raise _bad(what, value, where, valid) from None
    # bool is an int subclass: `timeout = true` must not mean one second.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(what, value, where, valid)
    if integer and (not isinstance(value, int) or value < 0):
        raise _bad(what, value, where, valid)
    if not integer and not value > 0:
        raise _bad(what, value, where, valid)
    return value


def _text(section: dict[str, Any], key: str, where: str) -> str:
    value = section.get(key, "")
    if not isinstance(value, str):
        raise _bad(key, value, where, "a string")
    return value.strip()


def llm_settings(home: Path, env: Mapping[str, str] | None = None) -> LLMSettings:
    """``[llm]`` in ``$MEMDIR_HOME/config.toml`` overlaid by the environment.

    Environment: ``MEMDIR_LLM`` (provider or provider:model), ``MEMDIR_LLM_MODEL``,
    ``MEMDIR_LLM_BUDGET``, ``OPENAI_BASE_URL`` (openai only), and the API key from
    ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` or the variable named by ``api_key_env``.
    """
    env = os.environ if env is None else env
    section, where = user_section(home, "llm", 'provider = "..." and so on')
    if "api_key" in section:  # never echo the value: it is a secret
        raise ConfigError(
            f"{where} contains an API key ([llm] api_key); memdir never reads keys from files",
            "delete it, put the key in an environment variable and name that variable with "
            "[llm] api_key_env = \"...\" (ANTHROPIC_API_KEY / OPENAI_API_KEY are the defaults)")
    unknown = sorted(set(section) - set(_CONFIG_KEYS))
    if unknown:
        raise ConfigError(f"unknown [llm] setting(s) {', '.join(unknown)} in {where}",
                          f"the [llm] settings are: {', '.join(_CONFIG_KEYS)}")

    provider, model = _provider_and_model(section.get("provider", "none"), f"{where} [llm]")
    model = _text(section, "model", where) or model
    base_url = _text(section, "base_url", where)
    env_llm = env.get("MEMDIR_LLM", "").strip()
    if env_llm:
        env_provider, env_model = _provider_and_model(env_llm, "the MEMDIR_LLM variable")
        if env_provider != provider:
            # The file's model and URL belong to the file's provider: a Claude model name
            # sent to an OpenAI server would only fail.
            model, base_url = "", ""
        provider, model = env_provider, env_model or model
    model = env.get("MEMDIR_LLM_MODEL", "").strip() or model
    if provider == "openai":
        base_url = env.get("OPENAI_BASE_URL", "").strip() or base_url
    if base_url and not base_url.startswith(("http://", "https://")):
        raise _bad("base_url", base_url, where, "an http:// or https:// URL")

    timeout = _number(section.get("timeout", 10.0), "timeout", where, integer=False)
    budget_value: object = section.get("daily_budget", 500)
    budget_where = where
    if env.get("MEMDIR_LLM_BUDGET", "").strip():
        budget_value, budget_where = env["MEMDIR_LLM_BUDGET"].strip(), "MEMDIR_LLM_BUDGET"
    budget = int(_number(budget_value, "daily_budget", budget_where, integer=True))
    command = _text(section, "claude_command", where) or "claude"

    key_env = _text(section, "api_key_env", where) or KEY_ENV.get(provider, "")
    api_key = env.get(key_env, "").strip() if key_env else ""
    return LLMSettings(provider, model or DEFAULT_MODELS.get(provider, ""), base_url, api_key,
                       timeout, budget, command, key_env)


def make_provider(settings: LLMSettings) -> Provider | None:
    """The configured provider; ``None`` for ``"none"``."""
    if settings.provider == "none":
        return None
    if settings.provider not in PROVIDERS:
        raise _bad("provider", settings.provider, "the LLM settings", ", ".join(PROVIDERS))
    # Imported here: urllib.request pulls in ssl and http.client, which the hook start path
    # of a user without an LLM must not pay for.
    from memdir.llm import providers as llm_providers

    return llm_providers.build(settings)


# ------------------------------------------------------------------------------ shape check

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "integer": (int,),
    "number": (int, float), "boolean": (bool,), "null": (type(None),),
}


def _type_problem(value: Any, expected: object, what: str) -> str | None:
    names = [expected] if isinstance(expected, str) else expected
    if not isinstance(names, list) or not names:
        return None  # no (usable) type constraint
    for name in names:
        types = _JSON_TYPES.get(str(name))
        # bool is an int subclass in Python but not a number in JSON Schema.
        if types is None or (isinstance(value, types) and
                             not (isinstance(value, bool) and name in ("integer", "number"))):
            return None
    return f"{what} is {type(value).__name__}, expected {' or '.join(map(str, names))}"


def shape_problem(data: Any, schema: dict[str, Any]) -> str | None:
    """What is wrong with ``data`` for ``schema``, checked one level deep (the top-level type,
    required keys, and the type of each declared property present); ``None`` when it fits.
    Not a full validator: callers stay defensive about nested items."""
    problem = _type_problem(data, schema.get("type"), "the reply")
    if problem or not isinstance(data, dict):
        return problem
    missing = [k for k in schema.get("required", []) if k not in data]
    if missing:
        return f"the reply lacks the required key(s) {', '.join(map(str, missing))}"
    properties = schema.get("properties", {})
    for key, sub in properties.items() if isinstance(properties, dict) else ():
        if key in data and isinstance(sub, dict):
            problem = _type_problem(data[key], sub.get("type"), f"the reply's {key!r}")
            if problem:
                return problem
    return None


# ------------------------------------------------------------------------------------- LLM

def _local_now() -> datetime:
    return datetime.now().astimezone()


class LLM:
    """What the rest of memdir uses. Never raises to the caller."""

    def __init__(self, provider: Provider | None, ledger: Ledger | None = None, *,
                 daily_budget: int = 500, clock: Callable[[], datetime] | None = None) -> None:
        self.provider = provider
        self.ledger = ledger
        self.daily_budget = daily_budget
        self.clock = clock or _local_now  # returns the *local* time: budgets are per local day
        # Calls made by this object per day: the budget floor when the ledger cannot count.
        self._calls: dict[str, int] = {}
        self._budget_warned: set[str] = set()

    @classmethod
    def from_settings(cls, settings: LLMSettings, ledger: Ledger | None) -> LLM:
        return cls(make_provider(settings), ledger, daily_budget=settings.daily_budget)

    @property
    def available(self) -> bool:
        """A provider is configured and today's budget is not spent."""
        return self.provider is not None and self._calls_today(self._day()) < self.daily_budget

    def _day(self) -> str:
        return date.isoformat(self.clock().date())

    def _calls_today(self, day: str) -> int:
        counted = 0
        if self.ledger is not None:
            try:
                counted = self.ledger.calls_today(day)
            except Exception:  # an unreadable index must cost a count, never the caller
                counted = 0
        return max(counted, self._calls.get(day, 0))

    def _record(self, day: str, purpose: str, ok: bool,
                tokens: Completion | LLMError | None = None) -> None:
        assert self.provider is not None
        self._calls[day] = self._calls.get(day, 0) + 1
        if self.ledger is None:
            return
        try:
            self.ledger.record(day, self.provider.name, purpose, ok=ok,
                               input_tokens=tokens.input_tokens if tokens else 0,
                               output_tokens=tokens.output_tokens if tokens else 0)
        except Exception as exc:  # Ledger.record should not raise; an unopenable index can
            warn("memdir: LLM call not counted (%s); the call itself was made", exc)

    def ask(self, system: str, prompt: str, schema: dict[str, Any], *, purpose: str,
            max_tokens: int = 512) -> Any | None:
        """The parsed JSON, or ``None`` (no provider, budget spent, or any failure)."""
        if self.provider is None:
            return None  # not configured is the normal case: no warning
        day = self._day()
        used = self._calls_today(day)
        if used >= self.daily_budget:
            if day not in self._budget_warned:
                self._budget_warned.add(day)
                warn(
                    "memdir: LLM daily budget spent (%d of %d calls on %s); %s runs without "
                    "the LLM until tomorrow. hint: raise [llm] daily_budget in "
                    "$MEMDIR_HOME/config.toml or MEMDIR_LLM_BUDGET", used, self.daily_budget,
                    day, purpose)
            return None
        name = self.provider.name
        from memdir.core.safety import redact_secrets, strip_private  # only when a call is made

        system = redact_secrets(strip_private(system))
        prompt = redact_secrets(strip_private(prompt))
        try:
            completion = self.provider.complete_json(system, prompt, schema,
                                                     max_tokens=max_tokens)
        except LLMError as exc:
            self._record(day, purpose, False, exc)
            warn("memdir: LLM call for %s failed (%s): %s. hint: %s", purpose, name,
                 exc.message, exc.hint)
            return None
        except Exception as exc:  # a provider bug must cost the feature, never the hook
            self._record(day, purpose, False)
            warn("memdir: LLM call for %s failed (%s): unexpected %s: %s. hint: this "
                 "is a bug in memdir, please report it; set MEMDIR_LLM=none meanwhile",
                 purpose, name, type(exc).__name__, exc)
            return None
        problem = shape_problem(completion.data, schema)
        self._record(day, purpose, problem is None, completion)
        if problem:
            warn("memdir: LLM reply for %s ignored (%s): %s. hint: the model did not "
                 "follow the JSON schema; use a stronger model ([llm] model)",
                 purpose, name, problem)
            return None
        return completion.data
