"""Use detection (:mod:`memdir.capture.uses`) on a labelled corpus of sessions: precision and
recall of "used", when several related memories are injected together.

Every case injects the three memories of one topic (they share a tool or a subject, and each
says something of its own) and holds one session: the user's prompt, then what the agent
wrote and ran. The agent either follows exactly one of the three (in its own words, in a
shell command, or both) or follows none of them (it answers with the shared word alone,
echoes the prompt, or does something else). A case is right when the memories counted as
used are exactly those it followed.

Usage::

    python bench/uses.py            # the table
    python bench/uses.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from memdir.capture.transcript import parse_transcript
from memdir.capture.uses import Injected, drawn_on


@dataclass(frozen=True)
class Topic:
    name: str
    prompt: str
    memories: tuple[str, str, str]
    follow: tuple[tuple[str, str], tuple[str, str], tuple[str, str]]  # (reply, command)
    shared_only: str  # a reply that names only what the three share
    elsewhere: str  # a reply that follows none of them


TOPICS = (
    Topic("pnpm", "set up the web app's dependencies",
          ("Use pnpm, never npm, in this repo",
           "pnpm workspaces live under packages/ and apps/",
           "CI installs with pnpm install --frozen-lockfile"),
          (("I'll use pnpm for this rather than npm.", "pnpm add zod"),
           ("The new library goes under packages/ as its own pnpm workspace.", ""),
           ("In the CI job I switched the step to the frozen lockfile.",
            "pnpm install --frozen-lockfile")),
          "pnpm is what we have here.", "Let me read the failing test output first."),
    Topic("postgres", "why do the integration tests fail?",
          ("Integration tests need the real PostgreSQL on port 5433, never mocks",
           "PostgreSQL migrations run with alembic upgrade head before the suite",
           "The PostgreSQL test database is reset by scripts/reset_db.sh"),
          (("The suite talks to PostgreSQL on 5433; I removed the mock.", ""),
           ("Running the migrations first.", "alembic upgrade head"),
           ("Resetting the database before the run.", "bash scripts/reset_db.sh")),
          "It is a PostgreSQL problem.", "The failure is a typo in the fixture name."),
    Topic("deploy", "ship the hotfix",
          ("Deploys go through make release on the staging-3 host",
           "Every deploy needs a green canary for 15 minutes before promotion",
           "Deploy notes go to the #releases channel in Slack"),
          (("Shipping it through the release target.", "make release HOST=staging-3"),
           ("The canary is green; waiting out the 15 minutes before promoting.", ""),
           ("Posted the deploy notes to #releases.", "")),
          "I'll deploy it now.", "First I need to rebase the branch on main."),
    Topic("docker", "build the image",
          ("Build images with docker buildx for linux/amd64 and linux/arm64",
           "Docker images are pushed to ghcr.io/acme with the git sha as tag",
           "Never use the latest tag for docker base images; pin the digest"),
          (("Building for both platforms.",
            "docker buildx build --platform linux/amd64,linux/arm64 ."),
           ("Pushed to ghcr.io/acme, tagged with the commit sha.", ""),
           ("Pinned the base image by its digest instead of a floating tag.", "")),
          "The docker image builds.", "The Makefile has a syntax error on line 12."),
    Topic("auth", "add login to the admin page",
          ("Auth uses Okta OIDC with the PKCE flow for every web client",
           "Session cookies for auth are httpOnly and SameSite=Lax",
           "The auth callback route is /oauth/callback, never /login/callback"),
          (("Wired the admin page to Okta with the PKCE flow.", ""),
           ("The session cookie is httpOnly with SameSite=Lax.", ""),
           ("Registered /oauth/callback as the redirect.", "")),
          "I added auth to the admin page.", "The admin page needed a new layout grid."),
    Topic("logging", "why is nothing logged in prod?",
          ("Logs use structlog with JSON output in production",
           "Production logs ship to Loki through the vector agent",
           "Never log request bodies: they carry personal data"),
          (("Configured structlog to emit JSON.", ""),
           ("The vector agent was down, so nothing reached Loki.",
            "systemctl restart vector"),
           ("I dropped the request body from the log line; it has personal data.", "")),
          "The logs are fine now.", "The cron job never ran because of the timezone."),
    Topic("python", "run the tests",
          ("Run the test suite with uv run pytest -x",
           "Tests that need the network are marked slow and skipped by default",
           "Type-check with mypy --strict before every commit"),
          (("Running the suite.", "uv run pytest -x"),
           ("Left the slow network tests skipped, as by default.", ""),
           ("Checked the types strictly before committing.", "mypy --strict src")),
          "The tests pass.", "I renamed the helper to match the module."),
    Topic("frontend", "add the settings form",
          ("Forms use react-hook-form with zod schemas",
           "Frontend components live in src/components with one folder each",
           "Every form button needs a data-testid for the e2e suite"),
          (("Built it with react-hook-form and a zod schema.", ""),
           ("Put the form in src/components/SettingsForm/.", ""),
           ("Gave the submit button a data-testid for the e2e tests.", "")),
          "The settings form is done.", "The API returned a 500, so I fixed the handler."),
    Topic("git", "merge the feature branch",
          ("Rebase feature branches on main; never merge main into them",
           "Squash merges only, with the PR title as the commit message",
           "Branch names follow feat/<ticket>-<slug>"),
          (("I rebased the branch onto main instead of merging main in.",
            "git rebase origin/main"),
           ("Squash-merged it with the PR title as the message.", ""),
           ("Renamed the branch to feat/ENG-412-settings.", "git branch -m feat/ENG-412-settings")),
          "Merged the branch.", "There was a conflict in package.json which I resolved."),
    Topic("kafka", "the consumer lags",
          ("Kafka consumers commit offsets manually after processing",
           "The orders topic has 24 partitions; keep consumers at 24 or fewer",
           "Kafka lag alerts fire above 10000 messages for 5 minutes"),
          (("Switched the consumer to commit offsets by hand after each batch.", ""),
           ("Scaled the group to 24 consumers, one per partition.", ""),
           ("The lag alert fired because it stayed over 10000 for five minutes.", "")),
          "Kafka is lagging.", "The lag came from a slow database query I optimised."),
)


@dataclass(frozen=True)
class Case:
    topic: str
    kind: str  # follows-text, follows-command, follows-both, shared-word, prompt-echo, other
    followed: int | None
    turns: tuple[dict[str, Any], ...]


def _turns(prompt: str, reply: str, command: str) -> tuple[dict[str, Any], ...]:
    turns: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    if command:
        turns.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": command}}]})
    if reply:
        turns.append({"role": "assistant", "content": reply})
    return tuple(turns)


def cases() -> list[Case]:
    out = []
    for t in TOPICS:
        for n, (reply, command) in enumerate(t.follow):
            kind = "follows-both" if reply and command else (
                "follows-command" if command else "follows-text")
            out.append(Case(t.name, kind, n, _turns(t.prompt, reply, command)))
        out.append(Case(t.name, "shared-word", None, _turns(t.prompt, t.shared_only, "")))
        out.append(Case(t.name, "prompt-echo", None,
                        _turns(t.prompt, f"OK: {t.prompt}.", "")))
        out.append(Case(t.name, "other", None, _turns(t.prompt, t.elsewhere, "")))
    return out


def evaluate() -> dict[str, Any]:
    by_kind: dict[str, dict[str, int]] = {}
    tp = fp = fn = 0
    wrong = []
    topics = {t.name: t for t in TOPICS}
    for case in cases():
        injected = [Injected(n, text) for n, text in enumerate(topics[case.topic].memories)]
        used = set(drawn_on(injected, parse_transcript(list(case.turns))))
        want = {case.followed} if case.followed is not None else set()
        row = by_kind.setdefault(case.kind, {"cases": 0, "right": 0, "tp": 0, "fp": 0,
                                             "fn": 0})
        row["cases"] += 1
        row["right"] += used == want
        row["tp"] += len(used & want)
        row["fp"] += len(used - want)
        row["fn"] += len(want - used)
        tp, fp, fn = tp + len(used & want), fp + len(used - want), fn + len(want - used)
        if used != want:
            wrong.append({"topic": case.topic, "kind": case.kind, "want": sorted(want),
                          "used": sorted(used)})
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {"precision": precision, "recall": recall, "tp": tp, "fp": fp, "fn": fn,
            "by_kind": by_kind, "wrong": wrong}


def table(result: dict[str, Any]) -> str:
    lines = ["| answer | cases | right | used right | used wrongly | missed |",
             "|---|---|---|---|---|---|"]
    for kind, row in result["by_kind"].items():
        lines.append(f"| {kind} | {row['cases']} | {row['right']} | {row['tp']} | "
                     f"{row['fp']} | {row['fn']} |")
    lines.append("")
    lines.append(f"precision {result['precision']:.3f} (target ≥ 0.95: "
                 f"{'PASS' if result['precision'] >= 0.95 else 'FAIL'}), "
                 f"recall {result['recall']:.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    args = p.parse_args(argv)
    result = evaluate()
    print(table(result))
    for item in result["wrong"]:
        print(f"- {item['topic']} {item['kind']}: wanted {item['want']}, used {item['used']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
