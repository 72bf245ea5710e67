"""The shape of the code: the locked public API, import rules, and a light CLI start path."""

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

# Adapters translate a framework's world into facade calls; everything else is core.
ADAPTERS = {"__main__.py", "mcp_server.py", "mcp_tools.py", "postgres.py", "embed.py",
            "postgres_conn.py", "postgres_recall.py", "postgres_schema.py",
            "postgres_search.py", "postgres_vectors.py", "postgres_plain_vectors.py",
            "postgres_worker.py", "postgres_evidence.py"}

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
    from memdir import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        if name in ("warn", "warnings_to"):  # the functions: failures that must not fail
            assert callable(cls) and not isinstance(cls, type)  # the caller, and their sink
            continue
        assert issubclass(cls, errors.MemdirError)
        assert cls.default_hint and cls.code


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module if node.module.startswith("memdir") else
                      node.module.split(".")[0])
    return found


def test_core_imports_no_framework_and_no_adapter() -> None:
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        if rel.parts[0] in ("cli", "server") or rel.name in ADAPTERS:
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
        assert lines <= 420, f"{path.relative_to(SRC)} has {lines} lines; split it by concept"


def test_no_grab_bag_modules() -> None:
    assert not [p for p in SRC.rglob("*.py") if p.stem in {"utils", "helpers", "misc", "common"}]
