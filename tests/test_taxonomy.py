"""Taxonomy presets, aliases, and the per-store choice in config."""

from __future__ import annotations

from pathlib import Path

import pytest

from memdir import PRESETS, ConfigError, Memdir, UnknownTypeError
from memdir.core.taxonomy import get_taxonomy

EXPECTED = {
    "memdir": ["user", "feedback", "preference", "policy", "decision", "procedure", "pitfall",
               "fact", "reference", "project", "summary", "episode"],
    "claude-code": ["user", "feedback", "project", "reference"],
    "cognova": ["decision", "fact", "solution", "pattern", "preference", "summary"],
    "cognitive": ["policy", "workflow", "pitfall", "architecture", "decision", "preference",
                  "fact"],
    "records": ["decisions", "procedures", "principles", "incidents", "preferences"],
}


def test_presets_reproduce_the_seed_systems() -> None:
    assert {name: tax.names for name, tax in PRESETS.items()} == EXPECTED
    cognova = get_taxonomy("cognova")
    assert [t.icon for t in cognova.types] == ["[D]", "[F]", "[S]", "[P]", "[*]", "[~]"]
    cognitive = get_taxonomy("cognitive")
    assert [t.relevance for t in cognitive.types] == [1.0, 0.8, 0.8, 0.8, 0.6, 0.6, 0.5]
    assert get_taxonomy("records").get("incidents").temporary
    memdir = get_taxonomy("memdir")
    assert {t.name for t in memdir.types if t.system} == {"summary", "episode"}
    assert memdir.get("procedure").layer == "procedural"
    assert all(t.title and t.guidance and t.icon for p in PRESETS.values() for t in p.types)


@pytest.mark.parametrize(("given", "canonical"), [
    ("workflow", "procedure"), ("architecture", "decision"), ("pattern", "policy"),
    ("principle", "policy"), ("constraint", "policy"), ("rule", "policy"),
    ("solution", "pitfall"), ("incident", "pitfall"), ("decisions", "decision"),
    ("policies", "policy"), ("Preferences", "preference"), ("FACT", "fact"),
])
def test_aliases_of_the_default_preset(given: str, canonical: str) -> None:
    assert get_taxonomy("memdir").resolve(given) == canonical


def test_singular_finds_a_plural_preset_type() -> None:
    assert get_taxonomy("records").resolve("decision") == "decisions"


def test_unknown_type_error_lists_valid_types() -> None:
    with pytest.raises(UnknownTypeError) as info:
        get_taxonomy("claude-code").resolve("decision")
    assert info.value.hint == "use one of: user, feedback, project, reference"


def test_preset_is_chosen_per_store_in_config(home: Path, repo: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        'taxonomy = "cognova"\n[user]\ntaxonomy = "claude-code"\n')
    with Memdir(home=home, project=repo) as md:
        assert md.directory("project").taxonomy.preset == "cognova"
        assert md.directory("user").taxonomy.preset == "claude-code"
        assert md.store("Fixed CORS via route rules", type="solution").type == "solution"
        with pytest.raises(UnknownTypeError):
            md.store("Prefers terse answers", type="preference", scope="user")
        assert md.store("Senior Go engineer", type="user", scope="user").type == "user"


def test_unknown_preset_in_config_is_a_clear_error(home: Path, repo: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text('taxonomy = "nope"\n')
    with pytest.raises(ConfigError) as info:
        Memdir(home=home, project=repo)
    assert "cognova" in info.value.hint


def test_invalid_toml_is_a_clear_error(home: Path, repo: Path) -> None:
    home.mkdir(parents=True)
    (home / "config.toml").write_text("taxonomy = \n")
    with pytest.raises(ConfigError) as info:
        Memdir(home=home, project=repo)
    assert "config.toml" in info.value.message and "toml" in info.value.hint.lower()
