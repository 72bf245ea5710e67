"""The words a claim's *value* is made of, for :mod:`memdir.upkeep.alignment`: numbers and
number words, units and their magnitudes, names (of tools, vendors, languages, regions,
people), the words where a clause's predicate starts, and opposites.

Closed classes, not lists fitted to examples: units of time, size and share; English number
words; verbs, auxiliaries and copulas a developer's memory is written with; names of the
languages, stores, clouds and tools developers write about (a token is a name by its form
too: capitalised inside a sentence, an acronym, a dotted, hyphenated or digit-bearing
identifier, or `code`). Lower-case keys; stems from :func:`memdir.upkeep.lexicon.stem`.

Invariant: :func:`quantity` gives one canonical value to one amount however it is written
("1 GB" and "1024 MB", "30s" and "30 seconds", "two" and "2"), and different values to
different amounts of one dimension; amounts of different dimensions never compare equal.
"""

from __future__ import annotations

import re
from functools import lru_cache

from memdir.upkeep.lexicon import ANTONYM, IRREGULAR, stem

__all__ = ["ARTICLES", "AUXILIARIES", "COORDINATORS", "COPULAS", "INVERSE", "NEGATING",
           "NUMBER_WORDS", "UNITS", "antonyms", "is_verb", "name_kind", "named", "quantity"]

# Words two claims may differ by and still say the same thing ("in the staging cluster" /
# "in staging cluster"): articles, possessive determiners, fillers, and the speaker of a
# rule ("I prefer X" / "Prefer X").
ARTICLES = frozenset("a an the please also just really actually currently always our your "
                     "their its my i we you me".split())
COPULAS = frozenset("is are am be was were equals =".split())
AUXILIARIES = frozenset("must should shall will would can could may might need needs do does "
                        "did has have had".split())
NEGATING = frozenset("not no never none nothing nobody without".split())
COORDINATORS = frozenset("and or , / & plus nor".split())
# Verbs whose subject is the value and whose object the thing described: "Priya owns the
# billing service" says who the billing service's owner is; "Sentry receives the errors of
# X", where they go.
INVERSE = frozenset(stem(w) for w in "own owns maintain maintains lead leads manage manages "
                    "oversee oversees receive receives".split())

_VERBS = """
    use run listen serve host live point return read write store keep send call depend own
    maintain lead manage go deploy ship pin expose connect talk take get set default expire
    retry time log push pull sync target support allow block redirect map mean contain
    include require need cache proxy forward route build compile test lint format install
    upgrade downgrade bump release publish tag merge rebase squash review approve scale start
    stop restart rotate renew expire back restore archive delete remove add create open close
    handle process queue schedule trigger fire alert page notify email post fetch query index
    load save flush dump import export encrypt decrypt sign verify hash limit throttle cap
    bind mount attach link prefer avoid like love hate want choose pick switch move migrate
    change replace rename live sit reside belong come generate emit produce consume receive
    accept reject fail succeed pass break crash hang wait sleep poll stream batch split join
    enable disable turn configure check validate enforce require wrap print show display
    render say tell ask answer know think feel work stay become seem look sound remain lose
    win buy sell pay cost weigh last take make do goes went gone ran written wrote built
    sent kept held put said told made taken given chose chosen moved lives mock stub fake
    patch indent commit squash tag wrap prefix suffix quote escape pad trim sort filter
    group order pipe invoke spawn fork kill clean purge vacuum refresh reload refactor
    document comment annotate type declare define name pass skip copy sync replicate
    mirror promote translate convert port transfer upload download export import collect
    treat scrape crawl follow ignore increase decrease raise lower round apply compress
    deny forbid permit grant revoke reject approve sample exceed alert hit touch call mock
    respond reply give provide offer
""".split()
_VERB_STEMS = frozenset(stem(w) for w in _VERBS) | frozenset(_VERBS)

# Names developers write in lower case as often as not, by what they are: two names of one
# kind for one subject are two values ("uses pnpm" / "uses yarn"); of two kinds they may
# both hold ("uses Redis" / "uses Postgres").
_KINDS = {
    "language": "go golang rust python java kotlin swift ruby php perl scala elixir erlang "
                "haskell clojure ocaml typescript javascript c c++ c# dart lua julia zig nim "
                "bash zsh fish powershell",
    "database": "postgres postgresql mysql mariadb sqlite mongodb cassandra dynamodb "
                "cockroachdb spanner oracle mssql clickhouse snowflake bigquery redshift "
                "aurora rds supabase neon planetscale",
    "cache": "redis memcached valkey keydb dragonfly",
    "search": "elasticsearch opensearch meilisearch typesense solr algolia",
    "queue": "kafka rabbitmq nats sqs sns pubsub kinesis redpanda pulsar activemq",
    "cloud": "aws gcp azure heroku vercel netlify fly cloudflare digitalocean hetzner linode",
    "orchestrator": "kubernetes k8s nomad swarm ecs eks gke aks fargate",
    "container": "docker podman containerd",
    "iac": "terraform pulumi ansible cloudformation cdk chef puppet",
    "ci": "jenkins circleci travis buildkite teamcity drone",
    "observability": "datadog grafana loki prometheus sentry pagerduty opsgenie splunk "
                     "honeycomb newrelic jaeger zipkin elk kibana logstash fluentd cloudwatch "
                     "stackdriver papertrail logdna",
    "js-packages": "npm pnpm yarn bun",
    "py-packages": "pip pipenv poetry uv conda hatch pdm rye",
    "build": "maven gradle sbt bazel make cmake ninja buck",
    "tests": "pytest unittest nose jest vitest mocha jasmine ava tap",
    "browser-tests": "cypress playwright selenium puppeteer webdriverio",
    "linter": "ruff flake8 pylint eslint biome oxlint tslint rubocop golangci-lint clippy "
              "standard stylelint",
    "formatter": "black prettier gofmt rustfmt yapf autopep8",
    "types": "mypy pyright pyre pytype",
    "frontend": "react vue svelte angular solid preact ember",
    "backend": "django flask fastapi rails laravel spring express nestjs gin echo fiber "
               "actix axum phoenix",
    "git-host": "github gitlab bitbucket gitea",
    "tracker": "jira linear asana trello shortcut youtrack",
    "chat": "slack teams discord mattermost",
    "auth": "okta auth0 keycloak cognito",
    "proxy": "nginx apache caddy traefik envoy haproxy",
    "os": "ubuntu debian fedora centos alpine rhel arch macos windows linux freebsd",
    "editor": "vim neovim emacs vscode intellij pycharm webstorm xcode zed",
    "payments": "stripe paypal braintree adyen",
    "email": "sendgrid mailgun postmark ses mailchimp",
    "storage": "s3 gcs minio",
    "browser": "chrome chromium firefox safari edge webkit",
    "scheduler": "airflow dagster prefect luigi cron temporal",
    "mobile": "flutter ionic xamarin",
}
# Names that are also plain English words: names only when capitalised.
_COMMON = frozenset("go make rust swift spark ruby julia dart echo express fiber spring next "
                    "solid vector linear teams arch edge black ninja chef puppet zed tap ava "
                    "nose fish make apache vault consul traefik linear notion temporal"
                    .split())
_KIND_OF = {name: kind for kind, names in _KINDS.items() for name in names.split()}
_REGION = re.compile(r"(?:us|eu|ap|sa|ca|me|af|uk|asia|europe|northamerica|southamerica)"
                     r"-[a-z]+(?:-?\d+)?")


def name_kind(word: str) -> str | None:
    """What kind of thing a lower-case name is (a language, a database, a region ...), or
    None when memdir does not know it."""
    if word in _KIND_OF:
        return _KIND_OF[word]
    return "region" if _REGION.fullmatch(word) else None


# Opposites beside :data:`memdir.upkeep.lexicon.ANTONYMS`, as they are written in tokens of
# their own ("read-only", "opt-in"); checked as written and as stems.
_MORE_ANTONYMS = (
    ("up", "down"), ("in", "out"), ("read-only", "read-write"), ("readonly", "readwrite"),
    ("fifo", "lifo"), ("opt-in", "opt-out"), ("allowlist", "denylist"),
    ("allowlist", "blocklist"), ("whitelist", "blacklist"), ("horizontal", "vertical"),
    ("horizontally", "vertically"), ("inclusive", "exclusive"), ("blocking", "non-blocking"),
    ("online", "offline"), ("enabled", "disabled"), ("asc", "desc"), ("yes", "no"),
    ("lowest", "highest"), ("earliest", "latest"), ("before", "after"), ("left", "right"),
    ("push", "pull"), ("import", "export"), ("upload", "download"), ("upgrade", "downgrade"),
    ("allowed", "forbidden"), ("allowed", "blocked"), ("cold", "hot"), ("weak", "strong"),
    ("soft", "hard"), ("shallow", "deep"), ("short", "long"), ("small", "large"),
    ("big", "small"), ("fast", "slow"), ("early", "late"), ("serial", "concurrent"),
    ("insecure", "secure"), ("unsafe", "safe"), ("visible", "hidden"), ("valid", "invalid"),
    ("supported", "unsupported"), ("signed", "unsigned"), ("debug", "release"),
    ("plaintext", "encrypted"), ("http", "https"), ("ipv4", "ipv6"), ("utc", "local"),
    ("absolute", "relative"), ("global", "local"), ("static", "dynamic"),
    ("monorepo", "polyrepo"), ("squash", "rebase"), ("merge", "squash"),
    ("with", "without"), ("head", "tail"), ("top", "bottom"), ("front", "back"),
    ("follow", "ignore"),
    ("follows", "ignores"), ("formal", "casual"), ("formal", "informal"),
    ("serially", "parallel"), ("serial", "parallel"), ("lazy", "eager"), ("major", "minor"),
    ("wide", "narrow"), ("light", "heavy"), ("sparse", "dense"), ("pessimistic", "optimistic"),
    ("ingress", "egress"), ("inbound", "outbound"), ("primary", "replica"),
    ("leader", "follower"), ("hard", "soft"), ("explicit", "implicit"), ("verbose", "terse"),
)
_NEGATING_PREFIXES = ("un", "in", "non", "dis", "im", "ir", "il")
_EXTRA = frozenset({(x, y) for x, y in _MORE_ANTONYMS} | {(y, x) for x, y in _MORE_ANTONYMS})

NUMBER_WORDS = {w: n for n, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
                     "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
                     "single": 1, "once": 1, "twice": 2, "dozen": 12, "none": 0})
# unit -> (dimension, factor to the dimension's base unit: seconds, bytes, percent, count)
UNITS: dict[str, tuple[str, float]] = {}
for _names, _dim, _factor in (
        ("ns nanosecond nanoseconds", "time", 1e-9), ("us µs microsecond microseconds", "time",
                                                      1e-6),
        ("ms msec msecs millisecond milliseconds", "time", 1e-3),
        ("s sec secs second seconds", "time", 1.0), ("m min mins minute minutes", "time", 60.0),
        ("h hr hrs hour hours", "time", 3600.0), ("d day days", "time", 86400.0),
        ("w wk wks week weeks", "time", 604800.0), ("month months", "time", 2592000.0),
        ("y yr yrs year years", "time", 31536000.0), ("b byte bytes", "size", 1.0),
        ("k kb kib kilobyte kilobytes", "size", 1024.0),
        ("mb mib megabyte megabytes meg megs", "size", 1024.0 ** 2),
        ("g gb gib gigabyte gigabytes gig gigs", "size", 1024.0 ** 3),
        ("t tb tib terabyte terabytes", "size", 1024.0 ** 4),
        ("% percent pct", "share", 1.0), ("x times", "factor", 1.0),
        ("ki", "size", 1024.0), ("mi", "size", 1024.0 ** 2), ("gi", "size", 1024.0 ** 3),
        ("ti", "size", 1024.0 ** 4), ("bps", "bitrate", 1.0), ("kbps", "bitrate", 1e3),
        ("mbps", "bitrate", 1e6), ("gbps", "bitrate", 1e9), ("rps qps rpm", "rate", 1.0)):
    for _name in _names.split():
        UNITS[_name] = (_dim, _factor)
# "10k requests" is ten thousand of them, not 10 KiB: a bare "k" only sizes bytes after "b".
_COUNT_SUFFIX = {"k": 1e3, "m": 1e6}
_ATTACHED = re.compile(r"(\d+(?:\.\d+)?)([a-zµ%]+)")
_DIGIT = re.compile(r"\d")
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp", "¥": "jpy"}
_CLOCK = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_VERSION = re.compile(r"v?\d+(?:\.\d+){2,}|v\d+(?:\.\d+)?")
_PLAIN = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")


def number(token: str) -> float | None:
    """The number a token writes (digits, a number word), or None."""
    if token in NUMBER_WORDS:
        return float(NUMBER_WORDS[token])
    if _PLAIN.fullmatch(token):
        return float(token.replace(",", ""))
    return None


def quantity(token: str, unit: str | None = None) -> str | None:
    """A canonical amount ("time:1800", "size:1048576", "n:3") of a token, with the unit
    that follows it when it has none attached; None when the token is no number. A version
    or a date ("3.12.1", "2024-06-03") is one too, compared with its own kind."""
    if token.isalpha() and token not in NUMBER_WORDS:
        return None  # most words: no digit, no number word
    if "-" in token and unit is None:  # "one-week", "2-hour"
        amount, _, named_unit = token.partition("-")
        if named_unit in UNITS and number(amount) is not None:
            return quantity(amount, named_unit)
    if token not in NUMBER_WORDS and _DIGIT.search(token) is None:
        return None
    if token[0] in _CURRENCY and number(token[1:]) is not None:  # "$29"
        return f"money:{_CURRENCY[token[0]]}{number(token[1:]):g}"
    if _DATE.fullmatch(token):
        return f"date:{token}"
    if _CLOCK.fullmatch(token):
        hours, minutes = token.split(":")[:2]
        return f"clock:{int(hours) * 60 + int(minutes)}"
    if _VERSION.fullmatch(token):
        return f"n:{token.lstrip('v')}"  # a version compares with a number: "2.5" / "2.4.1"
    value = number(token)
    if value is None:
        found = _ATTACHED.fullmatch(token)
        if not found:
            return None
        value, suffix = float(found.group(1)), found.group(2)
        if suffix in UNITS and suffix not in _COUNT_SUFFIX:
            dim, factor = UNITS[suffix]
        elif suffix in _COUNT_SUFFIX:
            return f"n:{value * _COUNT_SUFFIX[suffix]:g}"
        else:
            return None
        return f"{dim}:{value * factor:g}"
    if unit is not None and unit in UNITS:
        dim, factor = UNITS[unit]
        return f"{dim}:{value * factor:g}"
    return f"n:{value:g}"


@lru_cache(maxsize=65536)
def is_verb(word: str) -> bool:
    """Whether a lower-case word is a verb, auxiliary or copula: where a predicate starts."""
    return word in COPULAS or word in AUXILIARIES or word in _VERB_STEMS \
        or stem(word) in _VERB_STEMS or word in IRREGULAR


@lru_cache(maxsize=65536)
def named(surface: str, *, sentence_start: bool) -> bool:
    """Whether a token, as written, is a name: in backticks; an acronym or camelCase;
    capitalised inside a sentence; an identifier with digits, dots, hyphens, slashes or
    underscores (``us-east-1``, ``v2``, ``billing_db``); or a known tool or language."""
    if surface.startswith(("`", "#", "@")):
        return True  # code, a channel or a handle
    word = surface.lower()
    if word in _KIND_OF and (word not in _COMMON or surface[:1].isupper()):
        return True  # "Go" is a language, "go" a verb
    if any(c.isupper() for c in surface[1:]) or (surface[:1].isupper() and not sentence_start):
        return True
    if any(c.isdigit() for c in word) and any(c.isalpha() for c in word):
        return True
    return any(c in word for c in "._/") or ("-" in word and _identifier(word))


def _identifier(word: str) -> bool:
    # "us-east-1", "svc-a", "billing-label-importer": a hyphenated token with a digit, a
    # one-letter part or three parts is an id; "read-only", "opt-in", "end-to-end" are words.
    parts = word.split("-")
    return any(p.isdigit() for p in parts) or any(len(p) == 1 for p in parts) or (
        len(parts) >= 3 and not any(p in _LINKS for p in parts))


_LINKS = frozenset("to of the and in on by for a at or".split())


def antonyms(x: str, y: str) -> bool:
    """Whether two lower-case words are opposites: as written, as stems, one the other with
    a negating prefix ("encrypted" / "unencrypted", "sensitive" / "insensitive"), or one
    part of two hyphenated words ("lazy-load" / "eager-load")."""
    if (x, y) in _EXTRA or (stem(x), stem(y)) in ANTONYM:
        return True
    short, long_ = sorted((x, y), key=len)
    if len(short) >= 4 and any(long_ == p + short or long_ == p + "-" + short
                               for p in _NEGATING_PREFIXES):
        return True
    px, py = x.split("-"), y.split("-")
    if len(px) == len(py) > 1:
        differ = [(p, q) for p, q in zip(px, py, strict=True) if p != q]
        return len(differ) == 1 and antonyms(*differ[0])
    return False
