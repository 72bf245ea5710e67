"""The shapes of memory that ``bench/store_corpus.py`` builds stores from.

- :data:`FAMILIES`: templated project facts (ports, env vars, endpoints, owners, versions,
  hosts, regions, cron schedules, feature flags, config paths, timeouts, approvals,
  languages, vendors, database access, consent, redirects, data copies), several wordings
  each;
- :data:`FREE_CLAIMS`: free-text claims a developer states (preferences, policies, feedback,
  decisions, conventions, limits) that can be contradicted;
- :data:`NOTES`: free-text notes (pitfalls, procedures, incidents, references) made of random
  parts, never planted in a pair.

A :class:`Shape` draws a subject and the slots of its wordings; its subjects live in a
``space`` (by default its own name): the builder never gives one subject two memories of a
space, so only planted pairs contradict. ``alter`` changes the value (``kind`` names how:
another number, unit, name, person, antonym, negation, reversed relation). The vocabulary
leaves out words with an opposite in the conflict rule's lexicon (local / remote, public /
private, old / new, ...) so that random notes never differ by one antonym.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

TEAMS = ("platform payments billing growth infra data mobile web search identity analytics "
         "support ml devex security reliability checkout").split()
PARTS = ("ledger invoice order catalog profile session report event audit email media asset "
         "price stock cart refund payout review feed quota usage metric alert backup schema "
         "tenant device coupon shipment address contract webhook job export import label "
         "ticket chat").split()
ROLES = ("exporter indexer worker gateway scheduler api sync ingester notifier reconciler "
         "renderer crawler archiver router collector aggregator importer dispatcher resolver "
         "validator").split()
ENVS = ("staging", "production", "development", "preview", "sandbox", "qa")
PEOPLE = ("Priya Kenji Lucia Mateo Amara Tobias Ingrid Omar Lena Marco Alice Bob Carol Dave "
          "Erin Frank Grace Heidi Ivan Judy Nadia Oscar Peggy Rupert Sybil Trent Victor Walter "
          "Yasmin Zoe Hana Diego Farah Noah Ines Pavel Chloe Ravi Sofia Jonas Mei Kofi Elif "
          "Tomas Anya Bruno Greta Hugo Leila Nils").split()
LANGS = ("Go", "Rust", "Python", "TypeScript", "Java", "Kotlin", "Elixir", "Scala", "Ruby",
         "C#")
REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1",
           "ap-southeast-1", "ap-northeast-1", "sa-east-1", "ca-central-1")
LIBS = ("elasticsearch-py", "requests", "sqlalchemy", "django", "celery", "pydantic", "boto3",
        "redis-py", "kafka-python", "fastapi", "numpy", "pandas", "grpcio", "protobuf",
        "psycopg", "httpx", "alembic", "jinja2", "structlog", "uvicorn")
VENDORS = {"error reports": ("Sentry", "Rollbar", "Bugsnag", "Honeybadger"),
           "metrics": ("Datadog", "Prometheus", "New Relic", "Grafana Cloud"),
           "logs": ("Loki", "Splunk", "Papertrail", "Elastic"),
           "traces": ("Jaeger", "Honeycomb", "Tempo", "Lightstep")}
# Tools that do one job: a preference or a choice is between two of one group.
TOOL_GROUPS = tuple(group.split() for group in (
    "pnpm npm yarn bun", "ruff black autopep8 yapf", "flake8 pylint ruff", "pytest unittest nose2",
    "mypy pyright pytype", "poetry uv pip-tools pdm", "vite webpack esbuild rollup parcel",
    "jest vitest mocha", "eslint biome oxlint", "docker podman", "terraform pulumi opentofu",
    "helm kustomize", "make just bazel", "gradle maven"))
TOOLS = tuple(sorted({tool for group in TOOL_GROUPS for tool in group}))
NOUNS = ("cache queue migration schema fixture pipeline deploy release branch parser router "
         "handler client worker scheduler index dashboard alert runbook changelog manifest "
         "lockfile container image bucket report template component widget form modal hook "
         "reducer selector middleware plugin adapter driver script makefile snapshot "
         "benchmark profile trace payload").split()
VERBS = ("rename refactor split rebase squash invalidate retry validate serialize compress "
         "paginate throttle profile benchmark deploy tag sign review document deprecate vendor "
         "mock stub patch seed flush drain scale replicate archive prune vacuum reindex "
         "backfill bisect reproduce instrument sample regenerate").split()
ADJS = ("flaky slow stale legacy deprecated noisy brittle orphaned duplicate partial nightly "
        "shared custom experimental oversized unpinned misconfigured cached").split()
STYLES = (("tabs", "spaces"), ("single quotes", "double quotes"), ("camelCase", "snake_case"),
          ("rebase", "merge commits"), ("dataclasses", "plain dicts"), ("f-strings",
          "str.format"), ("absolute imports", "relative imports"), ("UTC", "local time"))
CONSENT_DATA = ("usage telemetry", "crash report", "analytics event", "marketing email",
                "session replay", "location data", "beta update", "product survey")
PRODUCTS = ("desktop app", "mobile app", "dashboard", "CLI", "browser extension",
            "admin console", "partner portal", "VS Code extension")
# Names of their own for products, hosts and databases: a team's or a part's name in them
# would repeat a word of the service's name ("the data CLI ... location data").
BRANDS = ("Atlas Beacon Comet Delta Ember Fjord Gala Harbor Iris Juno Kite Lumen Meridian "
          "Nova Orbit Pylon Quartz Relay Sierra Tundra").split()
DB_HOSTS = ("pg", "pgmain", "mysql", "aurora", "maria", "cockroach", "timescale", "citus")
DATABASES = ("warehouse", "reporting", "crm", "inventory", "geo", "fraud", "pricing", "loyalty",
             "compliance", "forecast", "telemetry", "identity_graph")
JOBS = ("backfill cleanup export rollup snapshot vacuum reindex digest purge sweep "
        "reconcile compaction").split()
EXTS = ("yaml", "toml", "json", "ini")
SUBS = ("line items", "comments", "history", "attachments", "owners", "tags", "events",
        "notes", "versions", "refunds", "payments", "audit trail", "labels", "contacts")

Slots = dict[str, Any]


@dataclass(frozen=True)
class Shape:
    name: str
    type: str
    kind: str  # how a planted contradiction differs
    wordings: tuple[str, ...]
    draw: Callable[[random.Random], tuple[object, Slots]]
    alter: Callable[[random.Random, Slots], Slots]
    scope: str = "project"
    space: str = ""  # subjects shared with other shapes (default: the name)



ENV_SUFFIXES = ("URL", "HOST", "PORT", "TIMEOUT_MS", "REGION", "BUCKET", "QUEUE", "LOG_LEVEL",
                "BATCH_SIZE", "MAX_RETRIES", "POOL_SIZE", "BASE_URL", "CACHE_TTL")
FEATURES = ("v2-layout", "fast-path", "bulk-edit", "dark-launch", "smart-retry", "inline-preview",
            "batch-mode", "new-pricing", "csv-export", "live-search", "auto-archive",
            "beta-banner", "split-view", "async-upload", "grouped-alerts", "usage-caps")
COUNTS = ("two", "three", "four", "five", "six")
REDIRECTS = (("HTTP", "HTTPS"), ("www.example.com", "example.com"), ("/v1 paths", "/v2 paths"),
             ("the old docs site", "the handbook"), ("port 80", "port 443"))
WORKS = ("frontend work", "scripting", "data pipelines", "release tooling", "CI jobs",
         "monorepo builds", "quick prototypes", "library code", "infra changes", "test suites")

Gen = Callable[[random.Random], Any] | tuple[Any, ...] | list[Any]


def _svc(r: random.Random) -> str:
    return f"{r.choice(TEAMS)}-{r.choice(PARTS)}-{r.choice(ROLES)}"


def _ident(r: random.Random) -> str:
    return r.choice(PARTS) + r.choice(ROLES).capitalize() + r.choice(("", "Client", "Store",
                                                                          "Manager", "View"))


def _draw(key: tuple[str, ...], **gens: Gen) -> Callable[[random.Random], tuple[object, Slots]]:
    """Slots drawn one by one (a tuple: a choice; a callable: called); the subject is the
    slots named by ``key``."""
    def draw(r: random.Random) -> tuple[object, Slots]:
        slots = {k: g(r) if callable(g) else r.choice(g) for k, g in gens.items()}
        return tuple(str(slots[k]) for k in key), slots
    return draw


def _other(r: random.Random, options: tuple[Any, ...] | list[Any] | range,
           current: Any) -> Any:
    return r.choice([o for o in options if o != current])


def _change(key: str, options: Gen) -> Callable[[random.Random, Slots], Slots]:
    """Another value for one slot: another choice of the tuple, or drawn until it differs."""
    def alter(r: random.Random, slots: Slots) -> Slots:
        if not callable(options):
            return {**slots, key: _other(r, options, slots[key])}
        value = options(r)
        while value == slots[key]:
            value = options(r)
        return {**slots, key: value}
    return alter


def _flip(key: str, a: str, b: str) -> Callable[[random.Random, Slots], Slots]:
    return lambda r, s: {**s, key: b if s[key] == a else a}


def _swap(r: random.Random, s: Slots) -> Slots:
    return {**s, "a": s["b"], "b": s["a"]}


def _port(r: random.Random) -> tuple[object, Slots]:
    if r.random() < 0.25:  # "The service number 172 listens on port 8172": numbers everywhere
        n = r.randint(100, 999)
        return ("number", n), {"svc": f"service number {n}", "port": 8000 + n,
                               "env": r.choice(ENVS)}
    svc = _svc(r)
    return svc, {"svc": f"{svc} service", "port": r.randint(1025, 7999), "env": r.choice(ENVS)}


def _endpoint(r: random.Random) -> tuple[object, Slots]:
    thing = r.choice(PARTS)
    path = f"/api/v{r.randint(1, 3)}/{r.choice(TEAMS)}/{thing}s/{{id}}"
    return path, {"path": path, "thing": thing, "sub": r.choice(SUBS),
                  "inc": r.choice(("with", "without"))}


def _host(r: random.Random) -> str:
    return f"{r.choice(DB_HOSTS)}-{r.randint(1, 90)}.internal"


def _version(r: random.Random) -> str:
    return f"{r.randint(1, 9)}.{r.randint(0, 24)}"


def _time(r: random.Random) -> str:
    return f"{r.randint(0, 23):02d}:{r.choice((0, 15, 30, 45)):02d}"


def _job(r: random.Random) -> str:
    return f"{r.choice(TEAMS)}-{r.choice(PARTS)}-{r.choice(JOBS)}"


def _ab(values: Callable[[random.Random], Sequence[str]]
        ) -> Callable[[random.Random], tuple[object, Slots]]:
    """A service (the subject) with two ordered values a, b ("from qa to staging")."""
    def draw(r: random.Random) -> tuple[object, Slots]:
        svc, (a, b) = _svc(r), values(r)
        return svc, {"svc": svc, "a": a, "b": b}
    return draw


def _F(name: str, type_: str, kind: str, wordings: tuple[str, ...],  # noqa: N802
       draw: Callable[[random.Random], tuple[object, Slots]],
       alter: Callable[[random.Random, Slots], Slots], *, scope: str = "project",
       space: str = "") -> Shape:
    return Shape(name, type_, kind, wordings, draw, alter, scope, space or name)


FAMILIES: tuple[Shape, ...] = (
    _F("port", "fact", "number", (
        "The {svc} listens on port {port} in the {env} cluster.",
        "In the {env} cluster the {svc} is reachable on port {port}.",
        "The {svc} serves requests on port {port} in {env}."), _port,
        _change("port", lambda r: r.randint(1025, 9999))),
    _F("env-var", "reference", "name", (
        "`{var}` is read from .env.{env} by the {svc} worker.",
        "The {svc} worker reads `{var}` from .env.{env}.",
        "Set `{var}` in .env.{env}; the {svc} worker reads it at start-up."),
        _draw(("var",), var=lambda r: f"{r.choice(TEAMS)}_{r.choice(PARTS)}_"
              f"{r.choice(ENV_SUFFIXES)}".upper(), env=ENVS, svc=_svc), _change("env", ENVS)),
    _F("endpoint", "reference", "negation", (
        "GET {path} returns the {thing} {inc} its {sub}.",
        "`GET {path}` responds with the {thing} {inc} its {sub} embedded.",
        "The endpoint GET {path} gives the {thing} {inc} its {sub}."),
        _endpoint,
        _flip("inc", "with", "without")),
    _F("owner", "project", "person", (
        "{person} owns the {svc} service; page them for incidents.",
        "The {svc} service is owned by {person}, who takes its incident pages.",
        "Incidents on the {svc} service go to {person}, its owner."),
        _draw(("svc",), svc=_svc, person=PEOPLE), _change("person", PEOPLE)),
    _F("version", "fact", "version", (
        "The {svc} pins {lib} {ver}.", "The {svc} is locked to {lib} {ver} in its requirements.",
        "The {svc} service stays on {lib} {ver} for now."),
        _draw(("svc", "lib"), svc=_svc, lib=LIBS, ver=_version), _change("ver", _version)),
    _F("host", "reference", "host", (
        "The {svc} connects to its primary database at {host}.",
        "The primary database of the {svc} is {host}."),
        _draw(("svc",), svc=_svc, host=_host), _change("host", _host)),
    _F("region", "fact", "region", (
        "The {svc} is deployed in {region}.", "The {svc} runs in the {region} region.",
        "We host the {svc} in {region}."), _draw(("svc",), svc=_svc, region=REGIONS),
        _change("region", REGIONS)),
    _F("cron-time", "procedure", "number", (
        "The {job} job runs every day at {time} UTC.",
        "Cron starts the {job} job at {time} UTC each day.",
        "The {job} job is scheduled daily at {time} UTC."),
        _draw(("job",), job=_job, time=_time), _change("time", _time), space="cron"),
    _F("cron-every", "procedure", "unit", (
        "The {job} job runs every {n} {unit}.", "Cron runs the {job} job every {n} {unit}."),
        _draw(("job",), job=_job, n=(5, 10, 15, 20, 30, 45), unit=("minutes", "hours")),
        _flip("unit", "minutes", "hours"), space="cron"),
    _F("flag", "project", "antonym", (
        "The `{flag}` feature flag is {state} in {env}.", "In {env}, the `{flag}` flag is {state}.",
        "Feature flag `{flag}` is {state} in {env} for everyone."),
        _draw(("flag",), flag=lambda r: f"{r.choice(TEAMS)}-{r.choice(PARTS)}-"
              f"{r.choice(FEATURES)}", env=ENVS, state=("enabled", "disabled")),
        _flip("state", "enabled", "disabled")),
    _F("config-path", "reference", "path", (
        "The {svc} reads its config from `{root}/{svc}/{file}.{ext}`.",
        "Config for the {svc} lives in `{root}/{svc}/{file}.{ext}`."),
        _draw(("svc",), svc=_svc, file=("config", "settings", "app", "service", "main"),
              ext=EXTS, root=("/etc", "/srv")),
        lambda r, s: {**s, "root": "/opt", "file": _other(r, ("config", "settings", "app"),
                                                          s["file"])}),
    _F("timeout", "fact", "unit", (
        "The {svc} client times out after {n} {unit}.",
        "Requests from the {svc} client give up after {n} {unit}."),
        _draw(("svc",), svc=_svc, n=lambda r: r.randint(2, 90), unit=("seconds", "minutes")),
        _flip("unit", "seconds", "minutes")),
    _F("approvals", "policy", "number-word", (
        "Merges to the {svc} repository need {count} approvals.",
        "Pull requests into {svc} require {count} approvals before merging.",
        "The {svc} repository asks for {count} approvals on every pull request."),
        _draw(("svc",), svc=_svc, count=COUNTS), _change("count", COUNTS)),
    _F("language", "fact", "language", (
        "The {svc} is written in {lang}.", "The {svc} is a {lang} codebase.",
        "We build the {svc} in {lang}."), _draw(("svc",), svc=_svc, lang=LANGS),
        _change("lang", LANGS)),
    _F("vendor", "decision", "vendor", (
        "The {svc} sends its {signal} to {vendor}.",
        "{vendor} receives the {signal} of the {svc}."),
        lambda r: ((s := _svc(r), g := r.choice(tuple(VENDORS))),
                   {"svc": s, "signal": g, "vendor": r.choice(VENDORS[g])}),
        lambda r, s: {**s, "vendor": _other(r, VENDORS[s["signal"]], s["vendor"])}),
    _F("access", "policy", "antonym", (
        "The {svc} connects to the {db} database as a {mode} user.",
        "The {db} database is {mode} for the {svc}."),
        _draw(("svc", "db"), svc=_svc, db=DATABASES, mode=("read-only", "read-write")),
        _flip("mode", "read-only", "read-write")),
    _F("consent", "policy", "antonym", (
        "{data} collection in the {brand} {app} is {mode}.",
        "The {brand} {app} treats {data} collection as {mode}."),
        _draw(("brand", "app", "data"), brand=BRANDS, app=PRODUCTS, data=CONSENT_DATA,
              mode=("opt-in", "opt-out")), _flip("mode", "opt-in", "opt-out")),
    _F("redirect", "policy", "reversed", (
        "The {svc} proxy redirects {a} to {b}.", "Redirect {a} to {b} on the {svc} proxy."),
        _ab(lambda r: r.choice(REDIRECTS)), _swap),
    _F("data-copy", "procedure", "reversed", (
        "Nightly jobs copy the {svc} tables from {a} to {b}.",
        "The {svc} tables are synced from {a} to {b} every night."),
        _ab(lambda r: r.sample(ENVS, 2)), _swap),
)

FREE_CLAIMS: tuple[Shape, ...] = (
    _F("prefer", "preference", "reversed", (
        "Prefers {a} over {b} for {work} in {ident}.",
        "For {work} in {ident}, the user prefers {a} to {b}.",
        "Likes {a} better than {b} for {work} in {ident}."),
        lambda r: ((i := _ident(r), g := r.randrange(len(TOOL_GROUPS))), {
            "ident": i, "work": r.choice(WORKS), **_two(r, TOOL_GROUPS[g])}), _swap,
        scope="user"),
    _F("always", "policy", "negation", (
        "{always} run {tool} on {noun} changes in {ident} before merging.",
        "Before merging {noun} changes in {ident}, {always_low} run {tool}."),
        lambda r: ((i := _ident(r), n := r.choice(NOUNS)), {
            "ident": i, "noun": n, "tool": r.choice(TOOLS), **_always(r.random() < 0.8)}),
        lambda r, s: {**s, **_always(s["always"] == "Never")}),
    _F("ask-first", "feedback", "negation", (
        "{rule} {verb} the {ident} {noun} without asking first. **Why:** the {adj} {noun2} "
        "in {ident} broke after the last one. **How to apply:** {verb} it in a separate change.",
        "{rule} {verb} the {ident} {noun} without asking first; the {adj} {noun2} in {ident} "
        "broke after the last one."),
        _draw(("verb", "ident", "noun"), verb=VERBS, ident=_ident, noun=NOUNS, adj=ADJS,
              noun2=NOUNS, rule=("Do not", "Never")),
        lambda r, s: {**s, "rule": "Feel free to" if s["rule"] != "Feel free to" else "Do not"}),
    _F("chose", "decision", "reversed", (
        "We chose {a} for the {noun} {noun2} instead of {b}.",
        "The {noun} {noun2} uses {a} rather than {b}."),
        lambda r: (frozenset(nouns := r.sample(NOUNS, 2)), {  # "hook selector", "selector hook"
            "noun": nouns[0], "noun2": nouns[1], **_two(r, r.choice(TOOL_GROUPS))}), _swap),
    _F("style", "preference", "name", (
        "Use {style} for {noun} code in {ident}.", "In {ident}, {noun} code uses {style}."),
        lambda r: ((i := _ident(r), n := r.choice(NOUNS), p := r.randrange(len(STYLES))),
                   {"ident": i, "noun": n, "pair": p, "style": r.choice(STYLES[p])}),
        lambda r, s: {**s, "style": _other(r, STYLES[s["pair"]], s["style"])}),
    _F("limit", "policy", "number", (
        "Keep {noun} payloads in {ident} under {n} KB.",
        "{ident} rejects {noun} payloads over {n} KB."),
        _draw(("ident", "noun"), ident=_ident, noun=NOUNS, n=lambda r: r.randint(8, 900)),
        _change("n", lambda r: r.randint(8, 900))),
)


def _two(r: random.Random, group: list[str]) -> Slots:
    a, b = r.sample(group, 2)
    return {"a": a, "b": b}


def _always(on: bool) -> Slots:
    return {"always": "Always", "always_low": "always"} if on else \
        {"always": "Never", "always_low": "never"}


def _date(r: random.Random) -> str:
    return f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


def _filler(r: random.Random) -> str:
    return r.choice((
        f"{r.choice(PEOPLE)} saw it while trying to {r.choice(VERBS)} the {r.choice(NOUNS)}.",
        f"It shows up in {r.choice(ENVS)} with a {r.choice(ADJS)} {r.choice(NOUNS)}.",
        f"See {_ident(r)} in the {r.choice(TEAMS)} {r.choice(NOUNS)} module.",
        f"Agreed with the {r.choice(TEAMS)} team on {_date(r)}.",
        f"Ticket {r.choice(TEAMS).upper()}-{r.randint(100, 9999)} tracks the follow-up.",
    ))


def _note(lead: Callable[[random.Random], str]) -> Callable[[random.Random], str]:
    return lambda r: " ".join([lead(r), *(_filler(r) for _ in range(r.choice((0, 1, 1, 2, 3))))])


NOTES: tuple[Callable[[random.Random], str], ...] = tuple(_note(lead) for lead in (
    lambda r: f"{r.choice(TOOLS)} {r.choice(NOUNS)} fails with a {r.choice(ADJS)} "
              f"{r.choice(NOUNS)} when {_ident(r)} is {r.choice(ADJS)}; {r.choice(VERBS)} "
              f"the {r.choice(NOUNS)} to get past it.",
    lambda r: f"To {r.choice(VERBS)} the {r.choice(NOUNS)}, run `make {r.choice(VERBS)}-"
              f"{r.choice(NOUNS)}`, then {r.choice(VERBS)} the {_ident(r)} {r.choice(NOUNS)}.",
    lambda r: f"The {_date(r)} incident: a {r.choice(ADJS)} {r.choice(NOUNS)} in {_ident(r)} "
              f"stalled the {r.choice(TEAMS)} {r.choice(NOUNS)} for {r.randint(3, 90)} minutes.",
    lambda r: f"{r.choice(NOUNS).capitalize()} dashboards for {r.choice(TEAMS)} are in "
              f"Grafana under {_ident(r)}.",
    lambda r: f"{r.choice(PEOPLE)} is working on the {_ident(r)} {r.choice(NOUNS)} for "
              f"{r.choice(TEAMS)}; it is due {_date(r)}.",
    lambda r: f"A {r.choice(ADJS)} {r.choice(NOUNS)} in {_ident(r)} made the {r.choice(NOUNS)} "
              f"{r.choice(ADJS)} until we added a {r.choice(NOUNS)} check.",
    lambda r: f"The {r.choice(TEAMS)} team plans to {r.choice(VERBS)} {_ident(r)} before "
              f"the {r.choice(NOUNS)} {r.choice(('freeze', 'launch', 'audit', 'review'))}.",
    lambda r: f"The {r.choice(NOUNS)} runbook for {_ident(r)} is on the {r.choice(TEAMS)} "
              f"wiki page about {r.choice(NOUNS)}s.",
))
