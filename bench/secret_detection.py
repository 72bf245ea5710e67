"""Secret benchmark: how many labelled secrets each write path refuses, and how many look-alikes.

The corpus is ``bench/secrets_corpus.py`` (fake, format-valid secrets of many providers,
built at run time from a fixed seed, and benign look-alikes). Every entry goes through every
write path as the text of a new memory; an entry counts as refused when the path refuses it
*for a secret* (``secret_detected``, or an extraction item skipped as "contains a secret").
Any other failure is counted apart as an error, so a broken path cannot pass for a strict one.

Paths: ``library`` (``Memdir.store``), ``update`` (``Memdir.update`` of an existing memory),
``store_many``, ``mcp`` (the ``memory_learn`` tool through the official client, in process),
``extraction`` (rule extraction of a one-message transcript), ``import`` (a JSON Lines file),
``api-sqlite`` and ``api-postgresql`` (a real ``memdir serve`` on 127.0.0.1, POST
/api/memory/store), ``cli`` (one ``memdir store`` process per entry: the slowest, about a minute).

Usage::

    python bench/secret_detection.py                       # every path
    python bench/secret_detection.py --paths library,cli   # some of them
    python bench/secret_detection.py --misses              # also list what each path got wrong
    python bench/secret_detection.py --seed 7 --paths library  # other random parts
    python bench/secret_detection.py --corpus holdout --paths library --misses

``--corpus holdout`` runs ``bench/secrets_holdout.py`` instead: a corpus written before the
detector's rules were read, so its numbers measure how the rules generalise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import secrets_holdout
from bench.secrets_corpus import SEED, Entry, corpus
from memdir import Memdir, SecretDetectedError
from memdir.capture.extract import SECRET_SKIPPED

PATHS = ("library", "update", "store_many", "mcp", "extraction", "import", "api-sqlite",
         "api-postgresql", "cli")
Outcome = str  # "refused", "stored" (or anything not refused for a secret), "error: ..."


@dataclass
class Tally:
    path: str
    secrets: int = 0
    secrets_refused: int = 0
    benign: int = 0
    benign_refused: int = 0
    errors: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)

    def add(self, entry: Entry, outcome: Outcome) -> None:
        refused = outcome == "refused"
        if outcome.startswith("error"):
            self.errors.append(f"{outcome}: {entry.text[:60]!r}")
        if entry.secret:
            self.secrets += 1
            self.secrets_refused += refused
            if not refused:
                self.misses.append(f"secret stored ({entry.provider}): {entry.text[:70]!r}")
        else:
            self.benign += 1
            self.benign_refused += refused
            if refused:
                self.misses.append(f"look-alike refused: {entry.text[:70]!r}")

    @property
    def recall(self) -> float:
        return self.secrets_refused / self.secrets if self.secrets else 0.0

    @property
    def false_rate(self) -> float:
        return self.benign_refused / self.benign if self.benign else 0.0


def _by_library(md: Memdir, entries: Sequence[Entry], how: str) -> Iterator[Outcome]:
    base = md.store("A memory the update path rewrites", type="fact") if how == "update" else None
    for entry in entries:
        try:
            if how == "update":
                assert base is not None
                md.update(base.id, content=entry.text)
            elif how == "store_many":
                md.store_many([{"content": entry.text, "type": "fact"}])
            else:
                md.store(entry.text, type="fact")
        except SecretDetectedError:
            yield "refused"
        except Exception as exc:
            yield f"error: {exc}"
        else:
            yield "stored"


def _by_extraction(md: Memdir, entries: Sequence[Entry]) -> Iterator[Outcome]:
    for n, entry in enumerate(entries):
        report = md.extract([{"role": "user", "content": entry.text}], llm=False,
                            session_id=f"bench-{n}")
        secret = any(i.reason.startswith(SECRET_SKIPPED) for i in report.skipped)
        yield "refused" if secret else "stored"


def _by_import(md: Memdir, entries: Sequence[Entry], tmp: Path) -> Iterator[Outcome]:
    src = tmp / "corpus.jsonl"
    src.write_text("".join(json.dumps({"type": "fact", "content": e.text}) + "\n"
                           for e in entries))
    report = md.import_(src)
    failed = {where: why for where, why in [*report.errors, *report.skipped]}
    for n in range(1, len(entries) + 1):
        why = failed.get(f"{src.name}:{n}", "")
        yield "refused" if "secret" in why else "stored"


def _by_mcp(md: Memdir, entries: Sequence[Entry]) -> Iterator[Outcome]:
    import anyio
    from mcp import Client
    from mcp.types import TextContent

    from memdir.agents.mcp_server import build_server

    outcomes: list[Outcome] = []

    async def main() -> None:
        async with Client(build_server(md=md), read_timeout_seconds=60) as client:
            for entry in entries:
                result = await client.call_tool("memory_learn",
                                                {"content": entry.text, "type": "fact"})
                text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
                outcomes.append("refused" if result.is_error and "secret" in text else
                                f"error: {text[:80]}" if result.is_error else "stored")

    anyio.run(main)
    yield from outcomes


def _by_api(entries: Sequence[Entry], tmp: Path, store: str) -> Iterator[Outcome]:
    import httpx

    from bench.api import _server

    home, project = tmp / f"home-{store}", tmp / f"project-{store}"
    project.mkdir()
    with _maybe_database(store == "postgresql") as database, \
            _server(home, project, database) as url:
        token = (home / "server.token").read_text().strip()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"},
                          timeout=30) as client:
            for entry in entries:
                reply = client.post("/api/memory/store",
                                    json={"content": entry.text, "type": "fact"})
                code = reply.json().get("error", {}).get("code") if reply.is_error else None
                yield ("refused" if code == "secret_detected" else
                       f"error: {reply.status_code} {reply.text[:80]}" if reply.is_error else
                       "stored")


@contextmanager
def _maybe_database(wanted: bool) -> Iterator[str | None]:
    if not wanted:
        yield None
        return
    from bench.api import _database

    with _database() as dsn:
        yield dsn


def _by_cli(entries: Sequence[Entry], tmp: Path) -> Iterator[Outcome]:
    home, project = tmp / "home-cli", tmp / "project-cli"
    project.mkdir()
    env = {**os.environ, "MEMDIR_HOME": str(home), "MEMDIR_SEMANTIC": "0"}
    for entry in entries:
        done = subprocess.run([sys.executable, "-m", "memdir", "store", "--type", "fact",
                               entry.text], cwd=project, env=env, capture_output=True,
                              text=True, check=False)
        yield ("refused" if done.returncode == 2 and "secret" in done.stderr else
               "stored" if done.returncode == 0 else f"error: {done.stderr.strip()[-80:]}")


def run(paths: Sequence[str], entries: Sequence[Entry] | None = None) -> list[Tally]:
    """One tally per write path in ``paths``, over ``entries`` (default: the corpus)."""
    entries = list(entries if entries is not None else corpus())
    tallies = []
    with tempfile.TemporaryDirectory(prefix="memdir-bench-secrets-") as name:
        tmp = Path(name)
        for path in paths:
            work = tmp / path
            work.mkdir()
            (work / "project").mkdir()
            runner: Callable[[], Iterator[Outcome]]
            with Memdir(home=work / "home", project=work / "project", sync_interval=0) as md:
                if path in ("library", "update", "store_many"):
                    runner = lambda md=md, p=path: _by_library(md, entries, p)  # noqa: E731
                elif path == "extraction":
                    runner = lambda md=md: _by_extraction(md, entries)  # noqa: E731
                elif path == "import":
                    runner = lambda md=md, w=work: _by_import(md, entries, w)  # noqa: E731
                elif path == "mcp":
                    runner = lambda md=md: _by_mcp(md, entries)  # noqa: E731
                elif path.startswith("api-"):
                    runner = lambda w=work, p=path: _by_api(entries, w, p[4:])  # noqa: E731
                else:
                    runner = lambda w=work: _by_cli(entries, w)  # noqa: E731
                tally = Tally(path)
                for entry, outcome in zip(entries, runner(), strict=True):
                    tally.add(entry, outcome)
                tallies.append(tally)
    return tallies


CORPORA = {"tuned": "bench/secrets_corpus.py", "holdout": "bench/secrets_holdout.py"}


def table(tallies: Sequence[Tally], entries: Sequence[Entry],
          source: str = CORPORA["tuned"]) -> str:
    providers = len({e.provider for e in entries if e.secret})
    lines = [f"Corpus: {sum(e.secret for e in entries)} secrets of {providers} providers, "
             f"{sum(not e.secret for e in entries)} look-alikes ({source}).",
             "",
             "| write path | secrets refused | look-alikes refused | other errors |",
             "|---|---|---|---|"]
    for t in tallies:
        lines.append(f"| {t.path} | {t.secrets_refused}/{t.secrets} ({t.recall:.1%}) | "
                     f"{t.benign_refused}/{t.benign} ({t.false_rate:.1%}) | {len(t.errors)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--paths", default=",".join(PATHS),
                        help=f"comma-separated write paths (default: all of {', '.join(PATHS)})")
    parser.add_argument("--misses", action="store_true", help="list each path's mistakes")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the corpus's random parts (default: the corpus's fixed one)")
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="tuned",
                        help="tuned: the corpus the rules were written with (default); holdout: "
                             "the one written before reading them")
    args = parser.parse_args(argv)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        parser.error(f"unknown path(s) {', '.join(unknown)}; use any of {', '.join(PATHS)}")
    os.environ.setdefault("MEMDIR_SEMANTIC", "0")
    if args.corpus == "holdout":
        entries: list[Entry] = list(secrets_holdout.corpus(  # type: ignore[arg-type]
            secrets_holdout.SEED if args.seed is None else args.seed))
    else:
        entries = corpus(SEED if args.seed is None else args.seed)
    tallies = run(paths, entries)
    print(table(tallies, entries, CORPORA[args.corpus]))
    if args.misses:
        for t in tallies:
            for line in [*t.misses, *t.errors]:
                print(f"{t.path}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
