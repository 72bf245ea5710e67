"""Settings and their trust rules.

Where settings come from, most trusted first:
- ``MEMDIR_HOME`` (environment) or ``home`` in the user's ``~/.config/memdir/config.toml``
  (``MEMDIR_CONFIG`` overrides that file's path): the only places that can move the home.
- ``$MEMDIR_HOME/config.toml``: the user's settings for every store (taxonomy presets,
  per-project memory directories).
- ``$MEMDIR_HOME/adopted.toml``: written by ``memdir adopt``; same shape as ``[projects]``.
- ``<repo>/.memdir/config.toml``: *untrusted* (it is committed, so it comes from other people).
  It may only choose the team store's taxonomy. Any key that could move a memory directory
  is ignored and reported by ``memdir doctor``: a malicious repository must never be able to
  point memory writes at ``~/.ssh`` (seed 004).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdir.core.errors import ConfigError
from memdir.core.model import Problem
from memdir.core.paths import default_home, xdg_dir
from memdir.core.taxonomy import DEFAULT_PRESET, PRESETS

__all__ = [
    "Config",
    "ProjectSettings",
    "load_config",
    "read_toml",
    "resolve_home",
    "save_adopted",
    "user_config_path",
    "user_section",
]

_REPO_ALLOWED = {("team", "taxonomy")}


@dataclass(frozen=True)
class ProjectSettings:
    memory_dir: Path | None = None
    taxonomy: str | None = None


@dataclass(frozen=True)
class Config:
    home: Path
    taxonomy: str = DEFAULT_PRESET
    scope_taxonomy: dict[str, str] = field(default_factory=dict)
    projects: dict[str, ProjectSettings] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()

    def taxonomy_for(self, scope: str, project_root: Path | None = None) -> str:
        if scope == "project" and project_root is not None:
            settings = self.projects.get(str(project_root))
            if settings and settings.taxonomy:
                return settings.taxonomy
        return self.scope_taxonomy.get(scope, self.taxonomy)


def user_config_path() -> Path:
    env = os.environ.get("MEMDIR_CONFIG")
    if env:
        return Path(env).expanduser()
    xdg = xdg_dir("XDG_CONFIG_HOME", "~/.config")
    if xdg is not None:
        return xdg / "memdir" / "config.toml"
    from platformdirs import user_config_dir

    return Path(user_config_dir("memdir", appauthor=False)) / "config.toml"


def read_toml(path: Path, *, follow: bool = True) -> dict[str, Any]:
    """A TOML file as a dict ({} when absent); ConfigError when unreadable. Only a regular
    file of at most 1 MiB is read, so a FIFO or /dev/zero cannot hang a command. ``follow``
    False (a file from a repository, which anyone may have committed): not through a symlink
    either."""
    from memdir.core.errors import UnsafeFileError
    from memdir.core.safe_open import CONFIG_FILE, read_file

    try:
        data = read_file(path, CONFIG_FILE, follow=follow)
    except FileNotFoundError:
        return {}
    except UnsafeFileError as exc:
        raise ConfigError(exc.message, exc.hint) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}",
                          f"check the permissions of {path}") from None
    import tomllib  # only when a file exists: most commands of most users read none

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path} is not valid TOML: {exc}",
            f"fix the syntax in {path} (see https://toml.io) or move the file away",
        ) from None


def user_section(home: Path, name: str, example: str) -> tuple[dict[str, Any], str]:
    """A ``[name]`` table of the home's config.toml ({} when absent) and where it was read;
    ConfigError naming ``example`` when the key is there but is not a table."""
    where = str(home / "config.toml")
    section = read_toml(home / "config.toml").get(name, {})
    if not isinstance(section, dict):
        raise ConfigError(f"[{name}] in {where} must be a table",
                          f"write it as a [{name}] section with {example}")
    return section, where


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """Explicit argument > MEMDIR_HOME > ``home`` in the user's config file > default."""
    if home is not None:
        return Path(home).expanduser().resolve()
    env = os.environ.get("MEMDIR_HOME")
    if env:
        return Path(env).expanduser().resolve()
    data = read_toml(user_config_path())
    value = data.get("home")
    if isinstance(value, str) and value:
        return Path(value).expanduser().resolve()
    return default_home()


def _check_preset(value: object, where: str) -> str:
    if not isinstance(value, str) or value not in PRESETS:
        raise ConfigError(
            f"unknown taxonomy preset {value!r} in {where}",
            f"use one of: {', '.join(PRESETS)}",
        )
    return value


def _projects(data: dict[str, Any], where: str) -> dict[str, ProjectSettings]:
    out: dict[str, ProjectSettings] = {}
    table = data.get("projects", {})
    if not isinstance(table, dict):
        raise ConfigError(f"[projects] in {where} must be a table",
                          'write [projects."/path/to/repo"] tables; see docs/settings.md')
    for root, entry in table.items():
        if not isinstance(entry, dict):
            continue
        mdir = entry.get("memory_dir")
        tax = entry.get("taxonomy")
        out[str(root)] = ProjectSettings(
            Path(mdir).expanduser() if isinstance(mdir, str) and mdir else None,
            _check_preset(tax, where) if tax is not None else None,
        )
    return out


def load_config(home: Path, repo_root: Path | None = None) -> Config:
    data = read_toml(home / "config.toml")
    where = str(home / "config.toml")
    taxonomy = _check_preset(data.get("taxonomy", DEFAULT_PRESET), where)
    scope_taxonomy: dict[str, str] = {}
    for scope in ("user", "project", "team"):
        section = data.get(scope)
        if isinstance(section, dict) and "taxonomy" in section:
            scope_taxonomy[scope] = _check_preset(section["taxonomy"], where)
    projects = _projects(read_toml(home / "adopted.toml"), str(home / "adopted.toml"))
    projects.update(_projects(data, where))
    problems: list[Problem] = []
    if repo_root is not None:
        repo_file = repo_root / ".memdir" / "config.toml"
        try:
            repo = read_toml(repo_file, follow=False)  # committed by anyone: never followed
        except ConfigError as exc:
            repo = {}
            problems.append(Problem("config", str(repo_file), exc.message, exc.hint))
        for key, value in _flatten(repo):
            if key in _REPO_ALLOWED:
                try:
                    scope_taxonomy["team"] = _check_preset(value, str(repo_file))
                except ConfigError as exc:
                    problems.append(Problem("config", str(repo_file), exc.message, exc.hint))
                continue
            problems.append(
                Problem(
                    "untrusted-setting",
                    str(repo_file),
                    f"ignored setting {'.'.join(key)!r}: settings inside a repository may "
                    "only choose the team taxonomy and can never move a memory directory",
                    f"put personal settings in {home / 'config.toml'} instead",
                )
            )
    return Config(home, taxonomy, scope_taxonomy, projects, tuple(problems))


Setting = tuple[tuple[str, ...], Any]


def _flatten(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[Setting]:
    out: list[Setting] = []
    for key, value in data.items():
        if isinstance(value, dict):
            out.extend(_flatten(value, (*prefix, key)))
        else:
            out.append(((*prefix, key), value))
    return out


def save_adopted(home: Path, project_root: Path, memory_dir: Path, taxonomy: str) -> None:
    """Record in ``$MEMDIR_HOME/adopted.toml`` that a project uses an existing directory."""
    import json

    from memdir.core.files import atomic_write

    path = home / "adopted.toml"
    table = read_toml(path).get("projects", {})
    table[str(project_root)] = {"memory_dir": str(memory_dir), "taxonomy": taxonomy}
    lines = ["# Written by `memdir adopt`: projects whose memory lives in another directory.", ""]
    for root, entry in sorted(table.items()):
        lines.append(f"[projects.{json.dumps(root)}]")
        for key in ("memory_dir", "taxonomy"):
            if isinstance(entry, dict) and entry.get(key):
                lines.append(f"{key} = {json.dumps(str(entry[key]))}")
        lines.append("")
    home.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "\n".join(lines))
