"""CLI command handlers: translate arguments, call the Memdir facade, print the result."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memdir.cli import hooks_cli, render, serve_cli, team_cli
from memdir.core.errors import InvalidMemoryError
from memdir.core.model import Hit, Memory
from memdir.memdir import Memdir

if TYPE_CHECKING:
    from memdir.team.postgres import PostgresStore

__all__ = ["run"]

Handler = Callable[[Memdir, argparse.Namespace], Any]


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def _stdin_or(value: str) -> str:
    return sys.stdin.read() if value == "-" else value


def _meta(pairs: Sequence[str] | None) -> dict[str, Any] | None:
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidMemoryError(f"--meta {pair!r} is not KEY=VALUE",
                                     "e.g. --meta ticket=ABC-12")
        out[key.strip()] = value
    return out


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2))
    elif text:
        print(text)


def _memories(args: argparse.Namespace, items: Sequence[Memory], empty: str) -> None:
    _emit(args, [m.to_dict() for m in items], render.memories_table(items) or empty)


def _filter_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"types": args.types, "scopes": getattr(args, "scopes", None),
            "tags": _csv(args.tags), "paths": _csv(args.paths)}


def cmd_store(md: Memdir, args: argparse.Namespace) -> None:
    memory = md.store(_stdin_or(args.content), type=args.type, scope=args.scope, name=args.name,
                      description=args.description, tags=_csv(args.tags) or (),
                      paths=_csv(args.paths) or (), relevance=args.relevance,
                      meta=_meta(args.meta), context=args.context, date=args.date)
    action = "reinforced" if memory.reinforced else "stored"
    text = (f"reinforced existing memory {memory.id} (reinforced {memory.reinforced}x): "
            f"{memory.path}" if memory.reinforced else f"stored {memory.id}: {memory.path}")
    conflicts = md.conflicts(memory)  # seed 004, for every type and scope: both are kept
    for other in conflicts:
        whose = "team memory" if other.scope == "team" else f"{other.scope} memory"
        print(f"warning: memory {memory.id} may contradict {whose} {other.id} "
              f"({other.name}): {other.description}\nhint: both are kept; archive the one "
              f"that is wrong (`memdir archive ID`), or change it with `memdir update "
              f"{other.id}`", file=sys.stderr)
    _emit(args, {"action": action, "memory": memory.to_dict(),
                 "conflicts": [m.to_dict() for m in conflicts]}, text)


def _hits(args: argparse.Namespace, hits: Sequence[Hit], empty: str) -> None:
    _emit(args, [h.to_dict() for h in hits], render.hits_table(hits) or empty)


def cmd_search(md: Memdir, args: argparse.Namespace) -> None:
    hits = md.search(args.query, limit=args.limit, include_archived=args.archived,
                     sources=("memories", "sessions") if args.sessions else ("memories",),
                     mode="hybrid" if args.hybrid else "auto", **_filter_kwargs(args))
    _hits(args, hits, f"no memories match {args.query!r}")


def _titles(md: Memdir) -> dict[str, tuple[str, str]]:
    titles: dict[str, tuple[str, str]] = {}
    for scope in ("team", "user", "project"):
        for spec in md.directory(scope).taxonomy.types:
            titles[spec.name] = (spec.icon, spec.title)
    return titles


def cmd_about(md: Memdir, args: argparse.Namespace) -> None:
    hits = md.search(args.topic, limit=args.limit, **_filter_kwargs(args))
    memories = [h.memory for h in hits]
    _emit(args, [h.to_dict() for h in hits],
          render.grouped(memories, _titles(md)) if memories
          else f"nothing known about {args.topic!r}")


def cmd_decisions(md: Memdir, args: argparse.Namespace) -> None:
    filters = _filter_kwargs(args)
    filters["types"] = ["decision", *(args.types or [])]
    _memories(args, md.list(limit=args.limit, **filters), "no decisions recorded")


def cmd_recent(md: Memdir, args: argparse.Namespace) -> None:
    _memories(args, md.recent(args.n, **_filter_kwargs(args)), "no memories yet")


def cmd_list(md: Memdir, args: argparse.Namespace) -> None:
    items = md.list(status=args.status, limit=args.limit, order=args.order,
                    **_filter_kwargs(args))
    _memories(args, items, "no memories")


def cmd_context(md: Memdir, args: argparse.Namespace) -> None:
    context = md.context(args.query, budget_tokens=args.budget, format=args.format,
                         limit=args.limit, paths=_csv(args.paths))
    _emit(args, context.to_dict(), context.text)


def cmd_recall(md: Memdir, args: argparse.Namespace) -> None:
    result = md.recall(_stdin_or(args.prompt), args.session, limit=args.limit,
                       use_llm=not args.no_llm, paths=_csv(args.paths))
    _emit(args, result.to_dict(), result.text)


def cmd_get(md: Memdir, args: argparse.Namespace) -> None:
    memory = md.get(args.ref)
    _emit(args, memory.to_dict(), render.memory_full(memory))


def cmd_update(md: Memdir, args: argparse.Namespace) -> None:
    memory = md.update(
        args.ref, content=_stdin_or(args.content) if args.content is not None else None,
        name=args.name, description=args.description, tags=_csv(args.tags),
        paths=_csv(args.paths), relevance=args.relevance, meta=_meta(args.meta),
        reinforce=args.reinforce)
    _emit(args, memory.to_dict(), f"updated {memory.id}: {memory.path}")


def cmd_reclassify(md: Memdir, args: argparse.Namespace) -> None:
    memory = md.reclassify(args.ref, args.type)
    _emit(args, memory.to_dict(), f"{memory.id} is now a {memory.type}: {memory.path}")


def _simple(verb: str, method: str) -> Handler:
    def handler(md: Memdir, args: argparse.Namespace) -> None:
        memory = getattr(md, method)(args.ref)
        _emit(args, memory.to_dict(), f"{verb} {memory.id}: {memory.path}")
    return handler


def cmd_stats(md: Memdir, args: argparse.Namespace) -> None:
    stats = md.stats()
    _emit(args, stats.to_dict(), render.stats_text(stats))


def cmd_reindex(md: Memdir, args: argparse.Namespace) -> None:
    bar = render.Progress("reindexing", force=args.progress and not args.json)
    count = md.reindex(progress=bar, embeddings=args.embeddings)
    broken = md.stats().broken_files
    _emit(args, {"files": count, "broken": broken, "seconds": round(bar.elapsed(), 3)},
          f"reindexed {count} files in {bar.elapsed():.2f}s"
          + (f" ({broken} broken: see `memdir doctor`)" if broken else ""))


def cmd_doctor(md: Memdir, args: argparse.Namespace) -> int:
    from memdir.agents import http_hooks
    from memdir.agents.codex_trust import doctor_problems
    from memdir.upkeep.report import NOTICES

    found = (md.doctor() + doctor_problems(md.roots.worktree)
             + http_hooks.doctor_problems(md.home))
    _emit(args, [p.to_dict() for p in found], render.problems(found, NOTICES))
    return 1 if any(p.kind not in NOTICES for p in found) else 0


def cmd_types(md: Memdir, args: argparse.Namespace) -> None:
    data = {}
    lines = []
    for scope in ("user", "project", "team"):
        tax = md.directory(scope).taxonomy
        data[scope] = {"taxonomy": tax.preset, "types": [
            {"name": t.name, "icon": t.icon, "aliases": list(t.aliases), "layer": t.layer,
             "relevance": t.relevance, "guidance": t.guidance} for t in tax.types]}
        lines.append(f"{scope} ({tax.preset}):")
        lines.extend(f"  {t.icon} {t.name:<12} {t.guidance}" for t in tax.types)
    _emit(args, data, "\n".join(lines))


def cmd_export(md: Memdir | PostgresStore, args: argparse.Namespace) -> None:
    from memdir.upkeep.transfer import export_memories

    fmt = args.format or ("jsonl" if args.dest == "-" or args.dest.endswith(".jsonl")
                          else "markdown")
    count = export_memories(md, args.dest, fmt=fmt, scopes=args.scopes)
    if args.dest != "-":
        _emit(args, {"exported": count, "dest": args.dest, "format": fmt},
              f"exported {count} memories to {args.dest} ({fmt})")


def cmd_import(md: Memdir | PostgresStore, args: argparse.Namespace) -> int:
    from memdir.upkeep.transfer import import_memories

    report = import_memories(md, args.src, scope=args.scope)
    lines = [f"imported {len(report.imported)}, skipped {len(report.skipped)}, "
             f"errors {len(report.errors)}"]
    lines += [f"  skipped {w}: {why}" for w, why in report.skipped]
    lines += [f"  error {w}: {e}" for w, e in report.errors]
    _emit(args, report.to_dict(), "\n".join(lines))
    return 1 if report.errors else 0


def cmd_adopt(md: Memdir, args: argparse.Namespace) -> None:
    path = md.adopt_claude_code(args.source)
    _emit(args, {"memory_dir": str(path), "taxonomy": "claude-code"},
          f"project memory now lives in {path} (taxonomy claude-code)")


def cmd_episode(md: Memdir, args: argparse.Namespace) -> None:
    memory = md.episode(_stdin_or(args.event), outcome=args.outcome, tags=_csv(args.tags) or (),
                        scope=args.scope)
    _emit(args, memory.to_dict(), f"recorded episode {memory.id}: {memory.path}")


def cmd_procedure(md: Memdir, args: argparse.Namespace) -> None:
    if not args.steps and not (args.success or args.failure):
        raise InvalidMemoryError("nothing to do: give the steps (--step ...) or a run "
                                 "(--success / --failure)",
                                 'e.g. memdir procedure Release --step "tag" --step "push"')
    memory = None
    if args.steps:
        memory = md.procedure(args.name, args.steps, scope=args.scope,
                              tags=_csv(args.tags) or (), description=args.description)
    if args.success or args.failure:
        memory = md.procedure_run(memory.id if memory else args.name, success=args.success)
    assert memory is not None
    runs = f" ({memory.meta.get('success_count', 0)} successes, " \
           f"{memory.meta.get('failure_count', 0)} failures)"
    _emit(args, memory.to_dict(), f"procedure {memory.name!r} {memory.id}{runs}: {memory.path}")


def _transcript_file(args: argparse.Namespace) -> Any:
    """The transcript argument: the path (memdir reads it), or with ``--format text`` the
    file already read, plain text allowed."""
    if getattr(args, "format", "auto") != "text":
        return args.transcript
    from memdir.capture.transcript import parse_transcript

    return parse_transcript(args.transcript, format="text")


def cmd_index_session(md: Memdir, args: argparse.Namespace) -> None:
    result = md.index_session(_transcript_file(args), args.session)
    _emit(args, result.to_dict(), f"indexed session {result.session_id}: {result.chunks} "
                                  f"chunks from {result.messages} messages")


def cmd_extract(md: Memdir, args: argparse.Namespace) -> None:
    if args.transcript == "-":
        from memdir.capture.transcript import parse_text

        source: Any = parse_text(sys.stdin.read())
    else:
        source = _transcript_file(args)
    report = md.extract(source, llm=False if args.no_llm else None, dry_run=args.dry_run,
                        scope=args.scope, session_id=args.session)
    _emit(args, report.to_dict(), render.extract_report(report))


def cmd_onboard(md: Memdir, args: argparse.Namespace) -> None:
    text = md.onboarding()
    written = str(md.write_user_profile(args.claude_md)) if args.claude_md else None
    count = len(md.list(scopes=["user"], status="all"))
    lines = [text] if text else [f"{count} user memories: no onboarding needed"]
    if written:
        lines.append(f"wrote the User Profile section of {written}")
    _emit(args, {"needed": text is not None, "instructions": text, "user_memories": count,
                 "claude_md": written}, "\n".join(lines))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cmd_consolidate(md: Memdir, args: argparse.Namespace) -> None:
    from memdir.upkeep.conflicts import RESOLVE

    result = md.consolidate(dry_run=not args.yes or args.dry_run)
    limit = args.limit if args.limit and args.limit > 0 else None
    totals = result.totals
    shown = result.page(limit)
    changes = [op for op in shown if op.op != "conflict"]
    conflicts = [op for op in shown if op.op == "conflict"]
    n = sum(v for k, v in totals.items() if k != "conflict")
    lines = [f"{'applied' if result.applied else 'plan'}: {_count(n, 'operation')}"
             + ("" if result.applied or not n else " (apply with --yes)")]
    lines += [f"  {op.op:<8} {', '.join(op.memories)}: {op.reason}" for op in changes]
    lines += [f"  ... and {totals[k] - limit} more {k} operations (--limit 0 lists all)"
              for k in totals if k != "conflict" and limit and totals[k] > limit]
    if conflicts:  # reported, never applied: memories that disagree
        lines.append(f"{_count(totals['conflict'], 'conflict')}: never merged or archived "
                     "by rules")
        lines += [f"  conflict {', '.join(op.memories)}: {op.reason}" for op in conflicts]
        if limit and totals["conflict"] > limit:
            lines.append(f"  ... and {totals['conflict'] - limit} more (--limit 0 lists all)")
        lines.append(f"  to resolve: {RESOLVE}")
    _emit(args, result.to_dict(limit), "\n".join(lines))


def cmd_log(md: Memdir, args: argparse.Namespace) -> None:
    path = md.log(_stdin_or(args.text), scope=args.scope)
    _emit(args, {"log": str(path)}, f"logged to {path}")


def cmd_history(md: Memdir, args: argparse.Namespace) -> None:
    records = md.history()
    lines = [f"{r['at']}  {len(r['plan']['operations'])} operations"
             + ("  (interrupted)" if r.get("interrupted") else "")
             + ("  (undone)" if r["undone"] else "") for r in records]
    _emit(args, records, "\n".join(lines) or "no consolidation applied yet")


def cmd_undo(md: Memdir, args: argparse.Namespace) -> None:
    record = md.undo()
    if record is None:
        _emit(args, {"undone": None}, "nothing to undo")
        return
    kept = record.get("kept", [])
    what = "the interrupted plan begun" if record["interrupted"] else "the plan applied"
    _emit(args, {"undone": record["at"], "id": record["id"],
                 "interrupted": record["interrupted"], "kept": kept},
          "\n".join([f"undid {what} at {record['at']}", *(f"  kept: {k}" for k in kept)]))


def cmd_dream(md: Memdir, args: argparse.Namespace) -> None:
    result = md.dream(force=args.force)
    _emit(args, result.to_dict(), f"{'dreamt' if result.ran else 'no dream'}: {result.reason}"
          + (f" ({result.operations} operations)" if result.ran else ""))


HANDLERS: dict[str, Handler] = {
    "store": cmd_store, "search": cmd_search, "about": cmd_about, "decisions": cmd_decisions,
    "recent": cmd_recent, "list": cmd_list, "context": cmd_context, "recall": cmd_recall,
    "get": cmd_get, "update": cmd_update,
    "reclassify": cmd_reclassify, "archive": _simple("archived", "archive"),
    "restore": _simple("restored", "restore"), "delete": _simple("deleted", "delete"),
    "stats": cmd_stats, "reindex": cmd_reindex, "doctor": cmd_doctor, "types": cmd_types,
    "export": cmd_export, "import": cmd_import, "adopt": cmd_adopt, "episode": cmd_episode,
    "procedure": cmd_procedure, "index-session": cmd_index_session, "extract": cmd_extract,
    "onboard": cmd_onboard, "consolidate": cmd_consolidate, "dream": cmd_dream,
    "history": cmd_history, "undo": cmd_undo, "log": cmd_log, "team": team_cli.run,
}


def run(args: argparse.Namespace) -> int:
    if args.command == "hooks":  # agent settings files; no memory store involved
        return hooks_cli.run(args)
    if args.command == "serve":  # the server owns its stores, one per thread
        return serve_cli.run(args)
    if args.command == "daemon":
        from memdir.agents.daemon import serve as serve_daemon
        from memdir.core.config import resolve_home

        home = resolve_home(args.home)
        os.environ["MEMDIR_HOME"] = str(home)  # what the hook work it hands on resolves
        return serve_daemon(home, idle=args.idle)
    if getattr(args, "database", None) and args.command in ("export", "import"):
        from memdir.team.postgres import PostgresStore  # psycopg: only when a database is named

        with PostgresStore(args.database) as store:
            done = (cmd_export if args.command == "export" else cmd_import)(store, args)
        return done if isinstance(done, int) else 0
    if args.command == "mcp":  # the server owns its Memdir and its stdout
        from memdir.agents.mcp_stdio import serve

        return serve(args.home, args.project)
    # A one-shot process does not load the embedding model unless asked (--hybrid,
    # --embeddings, MEMDIR_SEMANTIC=1): it costs more than the command itself.
    flag = getattr(args, "hybrid", False) or getattr(args, "embeddings", False)
    env = os.environ.get("MEMDIR_SEMANTIC", "").strip().lower() in ("1", "on", "true", "yes")
    with Memdir(home=args.home, project=args.project,
                semantic=True if flag else (None if env else False)) as md:
        result = HANDLERS[args.command](md, args)
    return result if isinstance(result, int) else 0
