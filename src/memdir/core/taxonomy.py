"""Taxonomies: the closed set of memory types a store accepts, as data.

A preset reproduces one seed system's type list exactly (DESIGN §3). Each type carries its
aliases, icon, default relevance, layer, section title for injected context, a weight used by
strength, and one line of guidance for the model. ``Taxonomy.resolve`` is the only way a type
name from input becomes a type: aliases and plurals map to the canonical name, anything else
raises :class:`UnknownTypeError` listing the valid types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memdir.core.errors import UnknownTypeError

__all__ = ["DEFAULT_PRESET", "PRESETS", "Taxonomy", "TypeSpec", "get_taxonomy"]

Layer = Literal["semantic", "procedural", "episodic"]


@dataclass(frozen=True)
class TypeSpec:
    name: str
    icon: str
    title: str
    layer: Layer
    guidance: str
    weight: float = 1.0
    relevance: float | None = None  # default relevance; None -> the source's default
    aliases: tuple[str, ...] = ()
    system: bool = False  # made by memdir (summaries, episodes), not chosen by users
    baseline: bool = False  # always-on at session start when relevance >= high (layer A)
    temporary: bool = False  # decays faster (records' incidents)


@dataclass(frozen=True)
class Taxonomy:
    preset: str
    types: tuple[TypeSpec, ...]

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.types]

    def get(self, name: str) -> TypeSpec:
        return self.spec(self.resolve(name))

    def spec(self, canonical: str) -> TypeSpec:
        for t in self.types:
            if t.name == canonical:
                return t
        raise UnknownTypeError(canonical, self.preset, self.names)

    def lookup(self, name: str) -> TypeSpec | None:
        """The spec of a canonical name or alias, or None. Never raises."""
        try:
            return self.get(name)
        except UnknownTypeError:
            return None

    def resolve(self, given: str) -> str:
        key = given.strip().lower().replace(" ", "-").replace("_", "-")
        for t in self.types:
            if key == t.name or key in t.aliases:
                return t.name
        # Plurals map to the singular (decisions -> decision, policies -> policy) and, for a
        # preset whose types are plural (records), the singular to the plural.
        for singular in (*_singulars(key), key + "s", key[:-1] + "ies"):
            for t in self.types:
                if singular == t.name or singular in t.aliases:
                    return t.name
        raise UnknownTypeError(given, self.preset, self.names)


def _singulars(word: str) -> list[str]:
    out = []
    if word.endswith("ies"):
        out.append(word[:-3] + "y")
    if word.endswith("s"):
        out.append(word[:-1])
    if word.endswith("es"):
        out.append(word[:-2])
    return out


def _t(name: str, icon: str, title: str, layer: Layer, guidance: str, **kw: object) -> TypeSpec:
    return TypeSpec(name, icon, title, layer, guidance, **kw)  # type: ignore[arg-type]


_MEMDIR = (
    _t("user", "[U]", "About the user", "semantic",
       "The user's role, goals, expertise and how they like to work.",
       weight=1.0, baseline=True, aliases=("profile", "person")),
    _t("feedback", "[!]", "Feedback", "semantic",
       "A correction or confirmation of how to work; body carries **Why:** and **How to apply:**.",
       weight=1.0, baseline=True, aliases=("correction",)),
    _t("preference", "[*]", "Preferences", "semantic",
       "A like or dislike: tools, style, naming, communication.",
       weight=0.9, baseline=True, aliases=("pref", "style")),
    _t("policy", "[P]", "Policies", "semantic",
       "A rule or non-negotiable constraint that must always hold.",
       weight=1.0, relevance=1.0, baseline=True,
       aliases=("pattern", "principle", "constraint", "rule", "convention")),
    _t("decision", "[D]", "Decisions", "semantic",
       "A choice made, with its context and the alternatives rejected.",
       weight=0.9, aliases=("architecture", "adr")),
    _t("procedure", "[>]", "Procedures", "procedural",
       "A proven step-by-step workflow (build, deploy, release).",
       weight=0.9, aliases=("workflow", "howto", "runbook")),
    _t("pitfall", "[X]", "Pitfalls", "semantic",
       "A mistake to avoid or a problem solved, with its cause and fix.",
       weight=0.9, aliases=("solution", "incident", "gotcha", "bug")),
    _t("fact", "[F]", "Key Facts", "semantic",
       "A fact about the environment that cannot be read from the code.",
       weight=0.7, aliases=("note", "knowledge")),
    _t("reference", "[R]", "References", "semantic",
       "Where information lives in external systems (dashboards, tickets, channels).",
       weight=0.7, aliases=("link", "pointer")),
    _t("project", "[J]", "Project", "semantic",
       "Ongoing work: who does what, why, by when (absolute dates).",
       weight=0.8, aliases=("status", "deadline")),
    _t("summary", "[~]", "Summaries", "episodic",
       "A session summary written by memdir.", weight=0.5, relevance=0.5, system=True),
    _t("episode", "[E]", "Episodes", "episodic",
       "An event with its outcome, recorded by memdir.", weight=0.5, relevance=0.5,
       system=True, aliases=("event",)),
)

_CLAUDE_CODE = (
    _t("user", "[U]", "User", "semantic",
       "User identity, preferences and knowledge background.", baseline=True),
    _t("feedback", "[!]", "Feedback", "semantic",
       "Corrections and affirmations of the agent's behaviour, with Why and How to apply.",
       baseline=True),
    _t("project", "[J]", "Project", "semantic",
       "Project progress, decisions and deadlines (absolute dates).", weight=0.8),
    _t("reference", "[R]", "Reference", "semantic",
       "Locator information for external systems.", weight=0.7),
)

_COGNOVA = (
    _t("decision", "[D]", "Decisions", "semantic",
       "Choices about architecture, tools, or approach.", weight=0.9),
    _t("fact", "[F]", "Key Facts", "semantic",
       "Important information about the environment.", weight=0.7),
    _t("solution", "[S]", "Solutions", "semantic", "How a problem was solved.", weight=0.9),
    _t("pattern", "[P]", "Patterns", "semantic", "Recurring conventions.", weight=0.9),
    _t("preference", "[*]", "Preferences", "semantic",
       "User preferences for style, tools, workflows.", weight=0.9, baseline=True),
    _t("summary", "[~]", "Summaries", "episodic",
       "Session summaries and high-level context.", weight=0.5),
)

_COGNITIVE = (
    _t("policy", "[!]", "Policies", "semantic", "Rules, constraints, non-negotiables.",
       relevance=1.0, weight=1.0, baseline=True),
    _t("workflow", "[>]", "Workflows", "procedural", "Proven step-by-step processes.",
       relevance=0.8, weight=0.9),
    _t("pitfall", "[X]", "Pitfalls", "semantic", "Mistakes to avoid, failure patterns.",
       relevance=0.8, weight=0.9),
    _t("architecture", "[A]", "Architecture", "semantic",
       "System design decisions, boundaries.", relevance=0.8, weight=0.9, baseline=True),
    _t("decision", "[D]", "Decisions", "semantic", "Choices made with context.",
       relevance=0.6, weight=0.8),
    _t("preference", "[*]", "Preferences", "semantic", "User likes/dislikes, style choices.",
       relevance=0.6, weight=0.8, baseline=True),
    _t("fact", "[F]", "Facts", "semantic", "General knowledge, references.",
       relevance=0.5, weight=0.7),
)

_RECORDS = (
    _t("decisions", "[D]", "Decisions", "semantic",
       "Implementation choices, architectural trade-offs, technology selections."),
    _t("procedures", "[>]", "Procedures", "procedural",
       "Step-by-step workflows, build processes, deployment sequences."),
    _t("principles", "[P]", "Principles", "semantic",
       "Coding standards, design rules, constraints that guide future work.", baseline=True),
    _t("incidents", "[X]", "Incidents", "episodic",
       "Bugs encountered, root causes, and their fixes.", temporary=True, weight=0.8),
    _t("preferences", "[*]", "Preferences", "semantic",
       "User preferences, communication style, naming conventions.", baseline=True),
)

PRESETS: dict[str, Taxonomy] = {
    "memdir": Taxonomy("memdir", _MEMDIR),
    "claude-code": Taxonomy("claude-code", _CLAUDE_CODE),
    "cognova": Taxonomy("cognova", _COGNOVA),
    "cognitive": Taxonomy("cognitive", _COGNITIVE),
    "records": Taxonomy("records", _RECORDS),
}
DEFAULT_PRESET = "memdir"


def get_taxonomy(preset: str) -> Taxonomy:
    from memdir.core.errors import ConfigError

    try:
        return PRESETS[preset]
    except KeyError:
        raise ConfigError(
            f"unknown taxonomy preset {preset!r}",
            f"set taxonomy to one of: {', '.join(PRESETS)}",
        ) from None
