"""The shape of the code: the locked public API, packages by concept and the import rules
between them, small modules, and a light CLI start path."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memdir

SRC = Path(memdir.__file__).parent
FRAMEWORKS = {"argparse", "click", "typer", "fastapi", "starlette", "uvicorn", "mcp", "httpx",
              "psycopg", "numpy", "onnxruntime", "tokenizers", "pydantic"}
HEAVY = {"mcp", "fastapi", "starlette", "uvicorn", "httpx", "numpy", "onnxruntime",
         "tokenizers", "psycopg", "pydantic"}

# Lower layers never import higher ones. The facade (memdir.memdir) sits above "upkeep"
# and is composed from the layers below it (and from memdir.team.ops); agents, the team
# server, PostgreSQL and the CLI are adapters that call it.
LAYERS = {"core": 0, "llm": 1, "retrieval": 2, "capture": 3, "upkeep": 4, "agents": 5,
          "team": 5, "cli": 6}
FACADE = {"memdir", "memdir.memdir"}
# Adapters translate a framework's world into facade calls; everything else is core logic.
ADAPTERS = ("cli/", "team/server/", "team/postgres", "agents/mcp_", "retrieval/embed.py",
            "__main__.py")

PUBLIC = [
    "PRESETS", "ConfigError", "Context", "ContextItem", "Hit", "InvalidMemoryError",
    "LLMError", "Memdir", "MemdirError", "Memory", "MemoryFileError", "MemoryNotFoundError",
    "PathTraversalError", "Problem", "Recall", "RecallPrefetch", "Recalled", "Scope",
    "SecretDetectedError", "Stats", "Taxonomy", "TypeSpec", "UnknownTypeError", "__version__",
    "build_memory_prompt_section", "count_tokens", "start_recall_prefetch",
]


def test_public_api_is_locked() -> None:
    assert sorted(memdir.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(memdir, name), name


def test_every_error_is_a_memdir_error_with_a_hint() -> None:
    from memdir.core import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        if name in ("warn", "warnings_to"):  # the functions: failures that must not fail
            assert callable(cls) and not isinstance(cls, type)  # the caller, and their sink
            continue
        assert issubclass(cls, errors.MemdirError)
        assert cls.default_hint and cls.code


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def _imports(path: Path, *, top_only: bool = False) -> set[str]:
    """Modules ``path`` imports when it runs (imports under ``if TYPE_CHECKING`` left out):
    memdir modules by their dotted name (``from memdir.x import y`` gives ``memdir.x`` and
    ``memdir.x.y``), others by their top-level package."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    found: set[str] = set()
    nodes = tree.body if top_only else ast.walk(tree)
    for node in nodes:
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name if a.name.startswith("memdir") else a.name.split(".")[0]
                         for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "memdir":  # a submodule (memdir._scan), else the facade's API
                found.update(f"memdir.{a.name}" if any(SRC.glob(f"{a.name}.*"))
                             or (SRC / a.name).is_dir() else "memdir" for a in node.names)
            elif node.module.split(".")[0] == "memdir":
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
            else:
                found.add(node.module.split(".")[0])
    return found


def _package(rel: Path) -> str | None:
    return rel.parts[0] if len(rel.parts) > 1 else None


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def test_every_package_says_what_it_owns_and_may_import() -> None:
    packages = {p.parent.name for p in SRC.glob("*/__init__.py")}
    assert packages == set(LAYERS), packages ^ set(LAYERS)
    for name in packages:
        doc = ast.get_docstring(ast.parse((SRC / name / "__init__.py").read_text())) or ""
        assert len(doc) > 200 and "import" in doc, f"memdir/{name}/__init__.py: say what it " \
            "owns and what it may import"
    loose = sorted(p.name for p in SRC.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "memdir.py"], loose


def test_lower_layers_never_import_higher_ones() -> None:
    modules = _modules()
    for path in modules.values():
        rel = path.relative_to(SRC)
        package = _package(rel)
        if package is None:
            continue
        for imported in _imports(path):
            if not imported.startswith("memdir") or imported not in modules:
                continue
            if imported in FACADE:
                assert LAYERS[package] >= LAYERS["agents"], \
                    f"{rel} calls the facade ({imported}); only adapters may"
                continue
            target = _package(modules[imported].relative_to(SRC))
            if target is None:  # memdir._scan and friends
                continue
            assert LAYERS[target] <= LAYERS[package], \
                f"{rel} ({package}) imports {imported} ({target}), a higher layer"
            if package == "core":
                assert target == "core", f"{rel}: core imports no other memdir package"


def test_no_circular_imports_at_module_level() -> None:
    modules = _modules()
    graph = {name: {i for i in _imports(path, top_only=True) if i in modules and i != name
                    and not (name.startswith(i + ".") or i in FACADE)}
             for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, stack: list[str]) -> None:
        if name in stack:
            raise AssertionError(" -> ".join([*stack[stack.index(name):], name]))
        if name in done:
            return
        for nxt in sorted(graph[name]):
            visit(nxt, [*stack, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_core_logic_imports_no_framework() -> None:
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(ADAPTERS):
            continue
        imports = _imports(path)
        assert not imports & FRAMEWORKS, (rel, imports & FRAMEWORKS)
        assert not any(i.startswith("memdir.cli") for i in imports), rel


def test_cli_start_path_stays_light() -> None:
    code = ("import sys, memdir.cli.main, memdir.cli.commands; "
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.split())
    assert not loaded & HEAVY, loaded & HEAVY


def test_modules_stay_small() -> None:
    for path in SRC.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        assert lines <= 400, f"{path.relative_to(SRC)} has {lines} lines; split it by concept"


def test_no_grab_bag_modules() -> None:
    assert not [p for p in SRC.rglob("*.py") if p.stem in {"utils", "helpers", "misc", "common"}]
