"""Provider token formats: the rules of :mod:`memdir.core.secrets` that name a token's issuer.

Each :class:`Rule` carries the lower-cased substrings its regex cannot match without (so the
regex runs only on the rare text that holds one) and, where a format alone is ambiguous, a
check of the matched text (it must look random, or a Basic credential must decode to
``user:password``). The formats are the issuers' documented prefixes and lengths, as public
secret scanners know them; prefixes that mean a token only when followed by random text
(``sk-``, ``hf_``) get the randomness check, so ``sk-1234-fix-login`` stays a branch name.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

__all__ = ["PROVIDER_RULES", "Rule", "looks_random", "strong_password"]


@dataclass(frozen=True)
class Rule:
    """One kind of secret: what it is called, its clues, its shape, an optional check.

    The regex is compiled on first use: most rules never run in a process (their clues are
    absent), and compiling them all would cost a hook tens of milliseconds at start-up."""

    label: str
    clues: tuple[str, ...]
    regex: str
    check: Callable[[str], bool] | None = None
    flags: int = 0
    # For a shape with no literal start (hex, then "-us6"): a regex for its rare middle part.
    # The full regex then runs only within ``_REACH`` characters of each anchor match, not
    # from every position of a long text.
    anchor: str = ""
    # Whether a match can do without a run of 16 token characters (a URL's short password, a
    # Basic credential, a PEM header): only these rules run on text that has no such run.
    spaced: bool = False

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.regex, self.flags)

    @cached_property
    def anchor_pattern(self) -> re.Pattern[str]:
        return re.compile(self.anchor)

    def matches(self, text: str) -> Iterator[re.Match[str]]:
        """The matches in ``text`` that pass the check, left to right, none overlapping."""
        if not self.anchor:
            found: Iterable[re.Match[str]] = self.pattern.finditer(text)
        else:
            found = self._anchored(text)
        for match in found:
            if re.search(_PLACEHOLDER_TOKEN, match.group(0)):  # re caches the compiled form
                continue  # a documented example or a masked token, not a credential
            if self.check is None or self.check(match.group(0)):
                yield match

    def _anchored(self, text: str) -> Iterator[re.Match[str]]:
        end = 0
        for hit in self.anchor_pattern.finditer(text):
            if hit.start() < end:
                continue
            match = self.pattern.search(text, max(end, hit.start() - _REACH),
                                        min(len(text), hit.end() + _REACH))
            if match:
                end = match.end()
                yield match


_REACH = 200
# A token of the right shape that is a published example (AWS's ``AKIAIOSFODNN7EXAMPLE``) or
# masked (``ghp_XXXX…``, ``sk_live_****``): a random token holds neither by chance.
_PLACEHOLDER_TOKEN = r"EXAMPLE|[xX]{8,}|\*{4,}"


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def looks_random(value: str, min_len: int = 16, min_entropy: float = 3.0) -> bool:
    """Long enough, letters mixed with digits (or both cases), and varied: a generated token,
    not a word, a slug of words or a hex digest (all one case of ``0-9a-f``)."""
    core = re.sub(r"[^A-Za-z0-9]", "", value)
    if len(core) < min_len:
        return False
    upper = any(c.isupper() for c in core)
    lower = any(c.islower() for c in core)
    digit = any(c.isdigit() for c in core)
    if sum((upper, lower, digit)) < 2:
        return False
    if re.fullmatch(r"[0-9a-f]+|[0-9A-F]+", core):
        return False  # a hex digest (a git SHA, a lockfile hash): its issuer rule would say
    # A slug of words ("1234-fix-login-redirect"): most of its parts are plain words.
    parts = [p for p in re.split(r"[-_./:]", value) if p]
    if any(len(p) >= 0.6 * len(core) and re.fullmatch(r"[0-9a-f]{16,}|[0-9A-F]{16,}", p)
           for p in parts):
        return False  # a digest with a label ("v1-deps-<sha1>", "sha256:<hex>")
    if len(parts) >= 3 and sum(p.isalpha() and p.islower() for p in parts) * 2 >= len(parts):
        return False
    return _entropy(core) >= min_entropy


def strong_password(value: str, min_len: int = 8) -> bool:
    """A value a person or a generator chose as a password: letters with digits, and symbols
    or mixed case (``hunter2-Xq9!zP``), or a random token; not a word, a slug of words, a
    path, a date or a version (``2025-03-04``, ``v2.14.0-rc.3``)."""
    if not min_len <= len(value) <= 128 or re.search(r"[/\\]", value):
        return looks_random(value, 16, 3.5)
    if re.match(r"\d{4}-\d{2}-\d{2}|v?\d+(?:\.\d+)+", value):
        return False
    letters = sum(c.isalpha() for c in value)
    digits = sum(c.isdigit() for c in value)
    symbols = len(value) - letters - digits
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    parts = [p for p in re.split(r"[-_.]", value) if p]
    if len(parts) >= 3 and sum(p.isalpha() and p.islower() for p in parts) * 2 >= len(parts):
        return False  # "sk-1234-fix-login": a slug of words
    if letters < 3 or not digits or _entropy(value) < 3.0:
        return False
    return bool(symbols and (mixed or digits >= 2)) or looks_random(value, 12, 3.0)


def _random(min_len: int, min_entropy: float = 3.0) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        return looks_random(text, min_len, min_entropy)
    return check


def _random_after(prefix: str, min_len: int) -> Callable[[str], bool]:
    """The part after the issuer's prefix (``sk-proj-``) must look random."""
    def check(text: str) -> bool:
        return looks_random(re.sub(prefix, "", text, count=1), min_len)
    return check


def _basic_credential(text: str) -> bool:
    import base64  # only for the rare text with "Basic <base64>" in it
    import binascii

    encoded = text.split()[-1]
    try:
        decoded = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    # "user:password", a printable user name and a printable password (a word that happens
    # to be base64, "Basic authentication", decodes to bytes that are neither).
    user, colon, password = decoded.partition(b":")
    try:
        printable = password.decode("utf-8").isprintable()
    except UnicodeDecodeError:
        return False
    header = text[:1] in "Aa"  # after "Authorization:" a short one counts too
    return (bool(colon) and printable and re.fullmatch(rb"[\x21-\x7e]+", user) is not None
            and (header or len(decoded) >= 4))


def _not_placeholder_password(text: str) -> bool:
    password = text.rsplit("@", 1)[0].rsplit(":", 1)[-1]
    return not re.fullmatch(r"(?i)\$\{?\w*\}?|<[^>]*>|\*+|x+|password|pass|pwd|secret|"
                            r"changeme|\[?redacted\]?|%[0-9a-f]{2}\w*|\{\{?\w*\}?\}", password)


def _r(pattern: str, flags: int = 0) -> str:
    return f"(?i:{pattern})" if flags & re.IGNORECASE else pattern


_B = r"(?<![A-Za-z0-9])"  # a token starts where a word does; "_" may precede it (KEY_ghp_…)
_E = r"(?![A-Za-z0-9])"
_I = re.IGNORECASE

PROVIDER_RULES: tuple[Rule, ...] = (
    Rule("a private key block", ("-----begin",),
         _r(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), spaced=True),
    Rule("an age secret key", ("age-secret-key-",), _r(r"AGE-SECRET-KEY-1[0-9A-Z]{58}")),
    Rule("an AWS access key id", ("akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa",
                                  "anva", "a3t"),
         _r(rf"{_B}(?:A3T[A-Z0-9]|AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[0-9A-Z]{{16}}{_E}")),
    Rule("an Anthropic API key", ("sk-ant-",), _r(rf"{_B}sk-ant-[a-z0-9]{{2,8}}-[\w-]{{20,}}")),
    Rule("an OpenAI-style API key", ("sk-",),
         _r(rf"{_B}sk-(?:proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_-]{{20,}}"),
         _random_after(r"sk-(?:proj-|svcacct-|admin-|live-|test-)?", 20)),
    Rule("a GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
         _r(rf"{_B}(?:gh[pousr]_[A-Za-z0-9]{{30,}}|github_pat_[A-Za-z0-9_]{{22,}})")),
    Rule("a GitLab token", ("glpat-", "gldt-", "glrt-", "glptt-", "gr1348941", "glsoat-",
                            "glcbt-", "glimt-", "gloas-", "glft-"),
         _r(rf"{_B}(?:gl(?:pat|dt|rt|ptt|soat|cbt|imt|oas|ft)-|GR1348941)[\w-]{{20,}}")),
    Rule("a Slack token", ("xox", "xapp-"),
         _r(rf"{_B}(?:xox[abposre]-(?:\d+-)*[A-Za-z0-9-]{{10,}}|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)")),
    Rule("a Slack webhook URL", ("hooks.slack.com",),
         _r(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}")),
    Rule("a Discord webhook URL", ("/api/webhooks/",),
         _r(r"discord(?:app)?\.com/api/webhooks/\d+/[\w-]{20,}")),
    Rule("a Discord bot token", (".",),
         _r(rf"{_B}[MNO][A-Za-z0-9_-]{{23,27}}\.[A-Za-z0-9_-]{{6}}\.[A-Za-z0-9_-]{{27,40}}{_E}"),
         _random(36), anchor=r"\.[A-Za-z0-9_-]{6}\."),
    Rule("a Telegram bot token", (":aa",),
         _r(rf"{_B}\d{{8,10}}:AA[A-Za-z0-9_-]{{33}}{_E}")),
    Rule("a Google API key", ("aiza",), _r(rf"{_B}AIza[0-9A-Za-z_-]{{35}}")),
    Rule("a Google OAuth client secret", ("gocspx-",), _r(r"GOCSPX-[A-Za-z0-9_-]{28}")),
    Rule("a Google OAuth token", ("ya29.",), _r(rf"{_B}ya29\.[0-9A-Za-z_-]{{30,}}")),
    Rule("a Stripe key", ("_live_", "_test_", "whsec_"),
         # Not pk_: a publishable key is meant to be embedded in web pages.
         _r(rf"{_B}(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{{16,}}|whsec_[A-Za-z0-9]{{24,}})")),
    Rule("a Square token", ("sq0atp-", "sq0csp-", "eaaa"),
         _r(rf"{_B}(?:sq0atp-[\w-]{{22}}|sq0csp-[\w-]{{43}}|EAAA[\w-]{{60}})")),
    Rule("a PayPal Braintree token", ("access_token$",),
         _r(r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}")),
    Rule("a JSON Web Token", ("eyj",),
         _r(rf"{_B}eyJ[A-Za-z0-9_-]{{8,}}\.eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]{{8,}}")),
    Rule("a bearer token", ("bearer",),
         _r(r"\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*", _I), _random(20), spaced=True),
    # "Basic <base64 of user:password>"; after "Authorization:" in any case, however short.
    Rule("a Basic auth credential", ("basic ",),
         _r(r"(?:\bBasic\s+[A-Za-z0-9+/]{8,}|(?i:\bauthorization[\"']?\s*[:=]\s*[\"']?basic)"
            r"\s+[A-Za-z0-9+/]{4,})={0,2}(?![A-Za-z0-9+/=])"), _basic_credential,
         spaced=True),
    Rule("a URL with credentials", ("://",),
         # The password may hold "@" (pasted unencoded): the host follows the last one.
         _r(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@'\"]*:[^\s/'\"]{2,}@[^\s/@'\"]+", _I),
         _not_placeholder_password, anchor="://", spaced=True),
    # "-u user:password": the password may hold "@" (no host follows it here).
    Rule("a command-line credential", ("-u ", "--user "),
         _r(r"(?:-u|--user)\s+['\"]?[\w.@-]{1,64}:(?P<pw>[^\s'\"]{6,})"),
         lambda text: looks_random(text.rsplit(":", 1)[-1].strip("'\""), 6, 2.0)
         or any(c in text.rsplit(":", 1)[-1] for c in "!#%^*+"), spaced=True),
    Rule("a database or registry password on a command line",
         ("mysql", "mariadb", "docker login", "podman login", "redis-cli", "sshpass",
          "mongosh", "helm registry"),
         _r(r"(?:mysql(?:dump|admin)?|mariadb|docker login|podman login|redis-cli|sshpass|"
            r"mongosh|helm registry login)\b[^\n|;&]{0,120}?\s(?:-p\s?|--password[= ]|-a\s)"
            r"['\"]?[^\s'\"$<{][^\s'\"]{5,}"),
         lambda text: looks_random(re.split(r"-p\s?|--password[= ]|-a\s", text)[-1].strip("'\""),
                                   6, 2.0), spaced=True),
    Rule("an AWS secret on a command line", ("configure set",),
         _r(r"aws configure set (?:aws_secret_access_key|aws_session_token)\s+"
            r"[A-Za-z0-9/+=]{16,}"), spaced=True),
    Rule("a URL with a token", ("@",),
         _r(r"\b[a-z][a-z0-9+.-]{1,20}://[A-Za-z0-9_-]{20,}@[^\s/'\"]+", _I),
         lambda text: looks_random(text.split("://", 1)[1].split("@", 1)[0], 20, 3.0)
         or bool(re.fullmatch(r"[0-9a-f]{32,}", text.split("://", 1)[1].split("@", 1)[0])),
         anchor="://"),
    Rule("an Azure storage key", ("accountkey=", "sharedaccesskey="),
         _r(r"(?:AccountKey|SharedAccessKey)=[A-Za-z0-9+/]{40,}={0,2}", _I)),
    Rule("an Azure SAS signature", ("sig=",),
         _r(r"[?&;]sig=[A-Za-z0-9%+/]{30,}(?:%3D|=){0,2}", _I)),
    Rule("an Azure AD client secret", ("q~",),
         _r(rf"{_B}[a-zA-Z0-9_~.-]{{3}}\dQ~[a-zA-Z0-9_~.-]{{31,34}}{_E}"), _random(30)),
    Rule("an npm token", ("npm_",), _r(rf"{_B}npm_[A-Za-z0-9]{{36}}{_E}"), _random(30)),
    Rule("a PyPI token", ("pypi-",), _r(r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}")),
    Rule("a Hugging Face token", ("hf_", "api_org_"),
         _r(rf"{_B}(?:hf_|api_org_)[A-Za-z0-9]{{30,}}{_E}"), _random(30)),
    Rule("a SendGrid key", ("sg.",), _r(rf"{_B}SG\.[\w-]{{22}}\.[\w-]{{43}}{_E}")),
    Rule("a Twilio key", ("sk", "ac"),
         _r(rf"{_B}(?:SK|AC)[0-9a-f]{{32}}{_E}"), anchor=r"(?:SK|AC)[0-9a-f]{8}"),
    Rule("a Mailchimp key", ("-us",), _r(rf"{_B}[0-9a-f]{{32}}-us\d{{1,2}}{_E}"),
         anchor=r"-us\d"),
    Rule("a Mailgun key", ("key-",), _r(rf"{_B}key-[0-9a-zA-Z]{{32}}{_E}"),
         lambda text: sum(c.isdigit() for c in text) >= 4 and not text[4:].isdigit()),
    Rule("a Shopify token", ("shpat_", "shpca_", "shppa_", "shpss_"),
         _r(rf"{_B}shp(?:at|ca|pa|ss)_[a-fA-F0-9]{{32}}{_E}")),
    Rule("a DigitalOcean token", ("dop_v1_", "doo_v1_", "dor_v1_"),
         _r(rf"{_B}do[por]_v1_[a-f0-9]{{64}}{_E}")),
    Rule("a Heroku key", ("hrku-",), _r(rf"{_B}HRKU-[A-Za-z0-9_-]{{30,}}")),
    Rule("a Databricks token", ("dapi",), _r(rf"{_B}dapi[a-f0-9]{{32}}(?:-\d)?{_E}")),
    Rule("a Doppler token", ("dp.",),
         _r(rf"{_B}dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{{40,}}")),
    Rule("a Dropbox token", ("sl.",), _r(rf"{_B}sl\.[A-Za-z0-9_-]{{130,}}")),
    Rule("a Linear API key", ("lin_api_",), _r(rf"{_B}lin_api_[A-Za-z0-9]{{40}}{_E}")),
    Rule("a Notion token", ("secret_", "ntn_"),
         _r(rf"{_B}(?:secret_[A-Za-z0-9]{{43}}|ntn_[A-Za-z0-9]{{40,}}){_E}"), _random(36)),
    Rule("an Atlassian API token", ("atatt",), _r(rf"{_B}ATATT3[A-Za-z0-9_=-]{{60,}}")),
    Rule("a Postman key", ("pmak-",), _r(rf"{_B}PMAK-[a-f0-9]{{24}}-[a-f0-9]{{34}}{_E}", _I)),
    Rule("a Sentry token", ("sntrys_", "sntryu_"),
         _r(rf"{_B}(?:sntrys_eyJ[A-Za-z0-9+/=_-]{{40,}}|sntryu_[a-f0-9]{{64}})")),
    Rule("a Grafana token", ("glc_", "glsa_"),
         _r(rf"{_B}(?:glc_[A-Za-z0-9+/]{{32,}}={{0,2}}|glsa_[A-Za-z0-9]{{32}}_[A-Fa-f0-9]{{8}})")),
    Rule("a New Relic key", ("nrak-", "nrjs-", "nrii-"),
         _r(rf"{_B}(?:NRAK-[A-Z0-9]{{27}}|NRJS-[a-f0-9]{{19}}|NRII-[\w-]{{32}}){_E}")),
    Rule("a Pulumi token", ("pul-",), _r(rf"{_B}pul-[a-f0-9]{{40}}{_E}")),
    Rule("a Terraform Cloud token", (".atlasv1.",),
         _r(r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}")),
    # Service, batch and recovery tokens; the short form is "hvs." and 24 characters.
    Rule("a HashiCorp Vault token", ("hvs.", "hvb.", "hvr."),
         _r(rf"{_B}hv[sbr]\.[A-Za-z0-9_-]{{20,}}"), _random(20)),
    # A personal access token: "pat", 14 characters, ".", 64 hex digits.
    Rule("an Airtable token", ("pat",), _r(rf"{_B}pat[A-Za-z0-9]{{14}}\.[a-f0-9]{{64}}{_E}")),
    Rule("an Alibaba Cloud key", ("ltai",), _r(rf"{_B}LTAI[A-Za-z0-9]{{20}}{_E}")),
    Rule("a PlanetScale token", ("pscale_",),
         _r(rf"{_B}pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{{32,64}}")),
    Rule("a Supabase token", ("sbp_",), _r(rf"{_B}sbp_[a-f0-9]{{40}}{_E}")),
    Rule("a Replicate token", ("r8_",), _r(rf"{_B}r8_[A-Za-z0-9]{{37}}{_E}"), _random(30)),
    Rule("a Groq key", ("gsk_",), _r(rf"{_B}gsk_[A-Za-z0-9]{{48,52}}{_E}"), _random(40)),
    Rule("an xAI key", ("xai-",), _r(rf"{_B}xai-[A-Za-z0-9]{{70,90}}{_E}"), _random(60)),
    Rule("a Perplexity key", ("pplx-",), _r(rf"{_B}pplx-[A-Za-z0-9]{{40,56}}{_E}"), _random(40)),
    Rule("a Facebook token", ("eaa",), _r(rf"{_B}EAA[A-Za-z0-9]{{90,}}{_E}"), _random(80)),
    Rule("a Contentful token", ("cfpat-",), _r(rf"{_B}CFPAT-[A-Za-z0-9_-]{{43}}")),
    Rule("a Figma token", ("figd_",), _r(rf"{_B}figd_[A-Za-z0-9_-]{{40}}")),
    Rule("a Netlify token", ("nfp_",), _r(rf"{_B}nfp_[A-Za-z0-9]{{36,}}{_E}")),
    Rule("a Fly.io token", ("fo1_", "fm1", "fm2_"),
         _r(rf"{_B}(?:fo1_[\w-]{{43}}|(?:FlyV1\s+)?fm[12][ar]?_[A-Za-z0-9+/_=-]{{100,}})")),
    Rule("a Render key", ("rnd_",), _r(rf"{_B}rnd_[A-Za-z0-9]{{28,}}{_E}"), _random(24)),
    Rule("a Resend key", ("re_",), _r(rf"{_B}re_[A-Za-z0-9]{{8}}_[A-Za-z0-9]{{24}}{_E}")),
    Rule("a Clerk or Stripe-style secret key", ("sk_live", "sk_test"),
         _r(rf"{_B}sk_(?:live|test)_[A-Za-z0-9]{{24,}}")),
    Rule("a Twitch or OAuth token", ("oauth:",), _r(rf"{_B}oauth:[a-z0-9]{{30}}{_E}")),
    Rule("a Cloudflare API token", ("cloudflare", "cf_api"),
         _r(r"(?i)(?:cloudflare|cf_api)[\w.-]{0,20}[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9_-]{40}"
            r"(?![A-Za-z0-9_-])"), spaced=True),
    Rule("an Okta token", ("okta",),
         _r(r"(?i)okta[\w.-]{0,20}[\"']?\s*[:=]\s*[\"']?00[A-Za-z0-9_-]{40}"), spaced=True),
    Rule("a Datadog key", ("datadog", "dd_api", "dd_app"),
         _r(r"(?i)(?:datadog|dd_api|dd_app)[\w.-]{0,20}[\"']?\s*[:=]\s*[\"']?[a-f0-9]{32,40}"
            r"(?![a-f0-9])"), spaced=True),
    Rule("a Heroku API key", ("heroku",),
         _r(r"(?i)heroku[\w.-]{0,20}[\"']?\s*[:=]\s*[\"']?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-"
            r"[0-9a-f]{4}-[0-9a-f]{12}"), spaced=True),
    Rule("an Adafruit IO key", ("aio_",), _r(rf"{_B}aio_[A-Za-z0-9]{{28}}{_E}"), _random(24)),
    Rule("a Shippo token", ("shippo_",), _r(rf"{_B}shippo_(?:live|test)_[a-f0-9]{{40}}")),
    Rule("an Asana token", (":",),
         _r(rf"{_B}[012]/\d{{10,16}}(?:/\d{{10,16}})?:[0-9a-f]{{32}}{_E}"),
         anchor=r"\d{10}:[0-9a-f]{32}"),
    Rule("a New Relic license key", ("nral",), _r(rf"{_B}[0-9a-f]{{36}}NRAL{_E}")),
    Rule("a RubyGems API key", ("rubygems_",), _r(rf"{_B}rubygems_[a-f0-9]{{48}}{_E}")),
    Rule("a NuGet API key", ("oy2",), _r(rf"{_B}oy2[a-z0-9]{{43}}{_E}"), _random(30)),
    Rule("a Docker Hub token", ("dckr_pat_", "dckr_oat_"),
         _r(rf"{_B}dckr_(?:pat|oat)_[A-Za-z0-9_-]{{27,}}")),
    # Any scheme but Bearer and Basic (rules of their own): "SSWS 00…", "Token token=…".
    Rule("an Authorization header credential", ("authorization",),
         _r(r"\bauthorization[\"']?\s*[:=]\s*[\"']?(?!bearer\b|basic\b)(?:[a-z][\w-]*\s+)?"
            r"(?:token=)?[A-Za-z0-9._~+/=-]{16,}", _I),
         lambda text: looks_random(re.split(r"[\s=:]+", text.rstrip("="))[-1], 16, 3.0),
         spaced=True),
    Rule("a credential passed as a command-line option",
         ("--api", "--token", "--pass", "--access", "--auth", "--secret", "--client", "--bot"),
         _r(r"(?<![\w-])--(?:api[-_]?key|(?:access|auth|api|bot)[-_]token|token|password|"
            r"passwd|passphrase|client[-_]secret|secret)(?:=|\s+)[\"']?[^\s\"'$<{%]"
            r"[^\s\"']{7,}", _I),
         lambda text: strong_password(re.split(r"[=\s]+", text, maxsplit=1)[-1].strip("\"'"))
         or looks_random(text.split(None, 1)[-1].split("=", 1)[-1], 16, 3.0), spaced=True),
    Rule("an LDAP bind password on a command line", ("ldap",),
         _r(r"\bldap\w*\b[^\n|;&]{0,200}?\s-w\s*['\"]?[^\s'\"$<{][^\s'\"]{5,}"),
         lambda text: strong_password(re.split(r"\s-w\s*", text)[-1].strip("'\""), 6)
         or looks_random(re.split(r"\s-w\s*", text)[-1].strip("'\""), 6, 2.0), spaced=True),
    Rule("an htpasswd password on a command line", ("htpasswd",),
         _r(r"\bhtpasswd\s+(?:-[a-zA-Z]+\s+)*?-[a-zA-Z]*b[a-zA-Z]*(?:\s+-[a-zA-Z]+)*"
            r"\s+\S+\s+\S+\s+['\"]?[^\s'\"]{6,}"),
         lambda text: looks_random(text.split()[-1].strip("'\""), 6, 2.0)
         or strong_password(text.split()[-1].strip("'\""), 6), spaced=True),
    # An SDK client built with a literal key: cohere.Client("…"), OpenAI(api_key="…").
    Rule("an API key passed to a client", ("client(", "ai(", "api("),
         _r(r"\b[\w.]*(?:client|ai|api)\(\s*(?:\w*(?:key|token)\w*\s*=\s*)?[\"']"
            r"[A-Za-z0-9_\-]{24,}[\"']", _I),
         lambda text: looks_random(text.rstrip("\"'").rsplit(text[-1], 1)[-1], 24, 3.5),
         spaced=True),
    Rule("a Frame.io or Mapbox token", ("fio-u-", "sk.eyj"),
         _r(rf"{_B}(?:fio-u-[\w=-]{{64}}|sk\.eyJ[\w.-]{{50,}})")),
)
