"""Where memory lives: worktrees share one store, project keys, the path-traversal defence
(seed 004), the trusted-settings rule, and MEMDIR_HOME.

Real git repositories and worktrees, real symlinks, real files: nothing is mocked.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import git
from memdir import Memdir, MemoryNotFoundError, PathTraversalError
from memdir.core.paths import find_git_roots, project_key, safe_join

# -- worktrees and project roots -------------------------------------------------------------


def test_two_worktrees_of_one_repo_share_one_store(home: Path, repo: Path) -> None:
    wt2 = repo.parent / "wt2"
    git("worktree", "add", "-q", "-b", "feature", str(wt2), cwd=repo)
    assert (wt2 / ".git").is_file()  # a linked worktree, not a second clone
    (repo / "src" / "deep").mkdir(parents=True)

    with Memdir(home=home, project=wt2, sync_interval=0) as in_wt, \
            Memdir(home=home, project=repo, sync_interval=0) as in_main, \
            Memdir(home=home, project=repo / "src" / "deep", sync_interval=0) as in_sub:
        assert in_wt.roots.canonical == in_main.roots.canonical == repo.resolve()
        assert in_wt.roots.worktree == wt2.resolve()
        project_dirs = {m.directory("project").path for m in (in_wt, in_main, in_sub)}
        assert project_dirs == {home.resolve() / "projects" / project_key(repo.resolve())}
        # Team memory travels with the code: each checkout has its own.
        assert in_wt.directory("team").path == wt2.resolve() / ".memdir" / "team"
        assert in_main.directory("team").path == repo.resolve() / ".memdir" / "team"

        stored = in_wt.store("The staging database is reset every Sunday night",
                             type="fact", tags=["staging"])
        for reader in (in_main, in_sub):
            hits = reader.search("staging database reset")
            assert [h.memory.id for h in hits] == [stored.id]
            assert reader.get(stored.id).body == stored.body
        stored_main = in_main.store("Feature flags live in flags.yaml", type="fact")
        assert [h.memory.id for h in in_wt.search("feature flags")] == [stored_main.id]


def test_outside_git_the_working_directory_is_the_project(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain" / "project"
    plain.mkdir(parents=True)
    roots = find_git_roots(plain)
    assert not roots.in_git, f"{plain} is unexpectedly inside git at {roots.canonical}"
    assert roots.canonical == roots.worktree == plain.resolve()

    monkeypatch.chdir(plain)
    with Memdir(home=home, sync_interval=0) as md:
        assert md.project_path == plain.resolve()
        expected = home.resolve() / "projects" / project_key(plain.resolve())
        assert md.directory("project").path == expected
        memory = md.store("No git here, the folder is the project", type="fact")
        assert memory.path is not None and memory.path.parent == expected
    # A sibling folder is another project.
    other = tmp_path / "plain" / "other"
    other.mkdir()
    with Memdir(home=home, project=other, sync_interval=0) as md2:
        assert md2.directory("project").path != expected
        assert md2.search("folder project") == []


# -- path traversal --------------------------------------------------------------------------

TRAVERSALS = [
    "../x.md",
    "a/../../x.md",
    "../../../../../../etc/passwd",
    "%2e%2e%2fx.md",
    "%2e%2e/x.md",
    "..%2fx.md",
    "%252e%252e%252f",
    "%252e%252e%252fx.md",
    "．．／x.md",  # fullwidth full stops and solidus (U+FF0E, U+FF0F)
    "．．/x.md",
    "..\\x.md",
    "a\\..\\..\\x.md",
    "/etc/passwd",
    "/x.md",
    "x\x00.md",
    "x.md\x00/../../y.md",
    "..",
    "a/..",
    "",
]


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("bad", TRAVERSALS)
def test_safe_join_refuses_traversal(tmp_path: Path, bad: str, exclusive: bool) -> None:
    base = tmp_path / "memdir" / "team"
    base.mkdir(parents=True)
    with pytest.raises(PathTraversalError):
        safe_join(base, bad, exclusive=exclusive)


@pytest.mark.parametrize("bad", [b for b in TRAVERSALS if b.endswith(".md") or "/" in b])
def test_get_refuses_traversal(md: Memdir, bad: str) -> None:
    (md.home / "x.md").parent.mkdir(parents=True, exist_ok=True)
    (md.home / "x.md").write_text("---\ntype: fact\n---\nsecret outside\n")
    with pytest.raises(PathTraversalError):
        md.get(bad)


def test_a_sibling_with_a_common_prefix_is_outside(tmp_path: Path) -> None:
    base = tmp_path / "team"
    (tmp_path / "team-evil").mkdir(parents=True)
    base.mkdir()
    with pytest.raises(PathTraversalError):
        safe_join(base, "../team-evil/x.md")


@pytest.mark.parametrize("good", ["feedback_x.md", "sub/dir.md", "café.md", "cafe\u0301.md",
                                  "日本語_メモ.md", "a..b.md", "dir/.hidden.md", "x%20y.md"])
@pytest.mark.parametrize("exclusive", [False, True])
def test_legit_names_are_accepted(tmp_path: Path, good: str, exclusive: bool) -> None:
    base = tmp_path / "memdir" / "project"
    base.mkdir(parents=True)
    joined = safe_join(base, good, exclusive=exclusive)
    assert joined == base / good
    assert str(joined).startswith(str(base) + os.sep)


def test_an_exclusive_join_of_a_plain_name_is_the_same_path(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    # A relative, unnormalised base gives the same absolute path either way.
    (tmp_path / "memdir" / "project").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    base = Path("memdir/./project")
    assert safe_join(base, "fact_x-2.md", exclusive=True) == safe_join(base, "fact_x-2.md")
    assert safe_join(base, "fact_x-2.md", exclusive=True).is_absolute()


def test_legit_names_reach_the_lookup(md: Memdir) -> None:
    for name in ("feedback_x.md", "sub/dir.md", "café.md"):
        with pytest.raises(MemoryNotFoundError):
            md.get(name)
    memory = md.store("Caches are warmed by the nightly job", type="fact", name="Café cache")
    assert memory.path is not None
    assert md.get(memory.path.name).id == memory.id


def test_symlinked_folder_inside_the_team_dir_is_refused(repo: Path, tmp_path: Path) -> None:
    team = repo / ".memdir" / "team"
    team.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (team / "evil").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PathTraversalError):
        safe_join(team, "evil/x.md")
    with pytest.raises(PathTraversalError):
        safe_join(team, "evil/new/deeper/x.md")
    with pytest.raises(PathTraversalError):
        safe_join(team, "evil")
    assert safe_join(team, "fine/x.md") == team / "fine" / "x.md"


def test_team_file_symlinked_outside_is_never_indexed(md: Memdir, repo: Path,
                                                       tmp_path: Path) -> None:
    team = repo / ".memdir" / "team"
    team.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "stolen.md"
    target.write_text("---\ntype: fact\nname: Stolen\n---\nzanzibar exfiltration payload\n")
    before = target.read_bytes()
    (team / "fact_evil.md").symlink_to(target)
    (team / "fact_good.md").write_text("---\ntype: fact\n---\nzanzibar legitimate note\n")

    md.reconcile()
    problems = md.doctor()
    unsafe = [p for p in problems if p.kind == "unsafe-file"]  # a symlink is never followed
    assert [Path(p.where).name for p in unsafe] == ["fact_evil.md"]
    assert unsafe[0].where == str(team / "fact_evil.md")

    hits = md.search("zanzibar", include_archived=True)
    assert [h.memory.body for h in hits] == ["zanzibar legitimate note"]
    assert md.search("exfiltration payload", include_archived=True) == []
    assert all(m.path is not None and m.path.name != "fact_evil.md"
               for m in md.list(status="all"))
    with pytest.raises((MemoryNotFoundError, PathTraversalError)):
        md.get("fact_evil.md")
    # Nothing was written through the link, and the index holds no row for it.
    assert target.read_bytes() == before
    conn = sqlite3.connect(md.index.path)
    try:
        rows = conn.execute("SELECT COUNT(*) FROM memories WHERE body LIKE '%exfiltration%'")
        assert rows.fetchone()[0] == 0
    finally:
        conn.close()
    # A write to the team scope does not touch the target either.
    md.store("Another zanzibar team note", type="fact", scope="team")
    assert target.read_bytes() == before


def test_team_dir_symlinked_outside_refuses_writes(md: Memdir, repo: Path,
                                                   tmp_path: Path) -> None:
    outside = tmp_path / "outside-team"
    outside.mkdir()
    (repo / ".memdir").mkdir()
    (repo / ".memdir" / "team").symlink_to(outside, target_is_directory=True)

    with pytest.raises(PathTraversalError):
        md.store("Team note that must not leave the repo", type="fact", scope="team")
    with pytest.raises(PathTraversalError):
        md.store_many([{"content": "Another escaping note", "type": "fact", "scope": "team"}])
    assert list(outside.iterdir()) == []
    # The other scopes still work and the problem is reported.
    assert md.store("Project note is fine", type="fact").scope == "project"
    assert any(p.kind == "team-dir" for p in md.doctor())
    assert list(outside.iterdir()) == []


# -- project keys ----------------------------------------------------------------------------


def test_project_keys_are_sanitised() -> None:
    assert project_key(Path("/home/ana/my.repo")) == "-home-ana-my-repo"
    assert project_key(Path("/srv/Code/app_v2 (copy)")) == "-srv-Code-app-v2--copy-"
    assert project_key(Path("/tmp/café/日本")) == "-tmp-caf----"
    for path in ("/a/b", "/x y/z.w", "/tmp/café/日本", "C:\\Users\\ana\\repo"):
        assert re.fullmatch(r"[A-Za-z0-9-]+", project_key(Path(path)))


def test_long_project_keys_are_truncated_with_a_hash_and_stay_unique() -> None:
    stem = "/" + "/".join(["very-long-directory-name"] * 12)
    a, b = Path(stem + "/project-a"), Path(stem + "/project-b")
    ka, kb = project_key(a), project_key(b)
    assert ka != kb
    assert len(ka) <= 200 and len(kb) <= 200
    assert re.fullmatch(r"[A-Za-z0-9-]+-[0-9a-f]{12}", ka)
    assert ka[:-12] == kb[:-12]  # same readable prefix; the hash tells them apart
    assert project_key(a) == ka  # stable
    # Paths that sanitise to the same long string are still told apart by the hash.
    c, d = Path(stem + "/x.y"), Path(stem + "/x_y")
    assert project_key(c) != project_key(d)
    short = Path("/short/path")
    assert project_key(short) == "-short-path"


# -- trusted settings ------------------------------------------------------------------------


def _write_repo_config(repo: Path, text: str) -> None:
    (repo / ".memdir").mkdir(exist_ok=True)
    (repo / ".memdir" / "config.toml").write_text(text)


def test_repo_config_cannot_move_memory_directories(home: Path, repo: Path,
                                                    tmp_path: Path) -> None:
    fake_home = Path(os.environ["HOME"])
    hijack = tmp_path / "hijacked"
    _write_repo_config(repo, f'''
home = "~/.ssh"
taxonomy = "claude-code"

[user]
taxonomy = "cognitive"

[projects."{repo.resolve()}"]
memory_dir = "{hijack}"

[projects."/"]
memory_dir = "~/.ssh"
''')
    with Memdir(project=repo, sync_interval=0) as md:  # home from MEMDIR_HOME
        assert md.home == home.resolve()
        memory = md.store("The build needs Python 3.12", type="fact")
        user = md.store("I prefer short answers", type="preference", scope="user")
        assert memory.path is not None and user.path is not None
        assert memory.path.parent == home.resolve() / "projects" / project_key(repo.resolve())
        assert user.path.parent == home.resolve() / "user"
        assert md.directory("project").taxonomy.preset == "memdir"
        assert md.directory("user").taxonomy.preset == "memdir"
        assert not (fake_home / ".ssh").exists()
        assert not hijack.exists()

        ignored = [p for p in md.doctor() if p.kind == "untrusted-setting"]
        assert {p.where for p in ignored} == {str(repo / ".memdir" / "config.toml")}
        messages = " ".join(p.message for p in ignored)
        for key in ("'home'", "'taxonomy'", "'user.taxonomy'", "memory_dir"):
            assert key in messages
        assert len(ignored) == 5


def test_repo_config_may_choose_the_team_taxonomy_only(home: Path, repo: Path) -> None:
    _write_repo_config(repo, '[team]\ntaxonomy = "cognova"\n\n[project]\ntaxonomy = "records"\n')
    with Memdir(home=home, project=repo, sync_interval=0) as fresh:
        assert fresh.directory("team").taxonomy.preset == "cognova"
        assert fresh.directory("project").taxonomy.preset == "memdir"
        assert fresh.directory("user").taxonomy.preset == "memdir"
        # "solution" is a type of its own in cognova, an alias of pitfall in memdir.
        assert fresh.store("Fix CORS with an origin list", type="solution",
                           scope="team").type == "solution"
        assert fresh.store("Retry the flaky upload twice", type="solution").type == "pitfall"
        problems = fresh.doctor()
        ignored = [p.message for p in problems if p.kind == "untrusted-setting"]
        assert len(ignored) == 1 and "'project.taxonomy'" in ignored[0]
        assert not any("team.taxonomy" in p.message for p in problems)


# -- MEMDIR_HOME -----------------------------------------------------------------------------


def test_memdir_home_env_is_honoured_without_arguments(
        tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere" / "memhome"
    monkeypatch.setenv("MEMDIR_HOME", str(elsewhere))
    monkeypatch.chdir(repo)
    with Memdir() as md:
        assert md.home == elsewhere.resolve()
        assert md.project_path == repo.resolve()
        memory = md.store("Home comes from the environment", type="fact")
        assert memory.path is not None
        assert memory.path.is_relative_to(elsewhere.resolve())
        assert (elsewhere / "index.sqlite").is_file()
        assert md.stats().total == 1
    assert not (tmp_path / "memdir-home").exists()  # the fixture's default home was unused


XDG_VALUES = [None, "", "   ", "/x/data", "relative/dir", "~/tilde", "/x/a:/y/b"]


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG fast path is Linux only")
@pytest.mark.parametrize("value", XDG_VALUES)
def test_the_home_and_config_folders_are_where_platformdirs_puts_them(
        monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    # memdir reads the XDG variables itself on Linux (importing platformdirs on every command
    # cost 5-8 ms); it must land exactly where platformdirs would.
    import platformdirs

    from memdir.core.config import user_config_path
    from memdir.core.paths import default_home

    monkeypatch.delenv("MEMDIR_CONFIG", raising=False)
    for variable in ("XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    assert default_home() == Path(platformdirs.user_data_dir("memdir", appauthor=False))
    assert user_config_path() == Path(
        platformdirs.user_config_dir("memdir", appauthor=False)) / "config.toml"


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG fast path is Linux only")
def test_session_start_does_not_import_platformdirs(home: Path, repo: Path) -> None:
    code = ("import sys; from memdir import Memdir; "
            "Memdir(project=sys.argv[1]).context(); "
            "print('platformdirs' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("MEMDIR_HOME", "MEMDIR_CONFIG")}
    env["XDG_DATA_HOME"] = str(home)  # the default home, found without platformdirs
    out = subprocess.run([sys.executable, "-c", code, str(repo)], capture_output=True,
                         text=True, env=env, check=True).stdout
    assert out.strip() == "False"
    assert (home / "memdir").is_dir()
