"""``memdir hook <event>``: what an agent's hooks run, reading the agent's JSON on stdin.

Events (Claude Code's names in brackets; Codex sends the same shape):
- ``session-start`` [SessionStart]: the session-start context (onboarding when there are no
  memories yet), at most ``MAX_START_CHARS`` characters, plain text or, with ``--format
  json``, ``{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext":
  ...}}``. Its matcher covers startup, resume, clear and compact, so memory returns after a
  compaction. The memories it shows in full count as surfaced for the session id, so the
  session's prompts do not recall them again.
- ``prompt`` [UserPromptSubmit]: per-prompt recall for the session id.
- Both are answered by the warm daemon when one runs for the home (it computes and claims
  the same text, with the model loaded and the index open: :mod:`memdir.agents.hook_client`);
  else in the hook's own process, which then starts the daemon for the next hooks (unless
  ``MEMDIR_DAEMON=0``).
- ``stop`` [Stop] and ``pre-compact`` [PreCompact]: extraction from what is new in
  ``transcript_path`` (plus ``last_assistant_message`` when given), and the injected memories
  the agent drew on in it counted as used (:mod:`memdir.capture.uses`); nothing when
  ``stop_hook_active`` is true. Only a Claude Code or Codex session file is read, from the
  session's offset and in bounded memory (:mod:`memdir.agents.hook_transcript`). With an
  LLM configured the extraction is detached into a background process (the model may take
  seconds); rules alone run in the hook, they take milliseconds.
- ``session-end`` [SessionEnd]: indexes the session, extracts what is left and dreams when
  the gates pass (:mod:`memdir.upkeep.dream`), detached into a background process, so the hook
  returns well within Claude Code's 1.5 s.

Invariants (hooks never break the agent):
- Any failure (unreadable JSON, a missing transcript, a read-only home, a locked index, a
  bug) is logged to ``$MEMDIR_HOME/logs/hooks.log`` (or nowhere, if even that fails) and the
  hook exits 0 with nothing on stdout.
- Each event has a time limit (``LIMITS``); past it the hook gives up, logs it and exits 0.
- ``MEMDIR_DISABLE=1``, or ``[hooks] enabled = false`` in config.toml, makes every hook a
  no-op.
- Only the standard library and memdir's core are imported: no MCP, HTTP or ML libraries.
- What a hook prints is the ``prompt`` context or recall's ``<system-reminder>`` blocks:
  stored text in them is neutralised (:mod:`memdir.core.neutralise`), so every tag in a hook's
  output is one memdir wrote.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from memdir.agents.hook_events import MAX_START_CHARS

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["EVENTS", "LIMITS", "MAX_START_CHARS", "hook_main", "run_hook"]

EVENTS = ("session-start", "prompt", "stop", "pre-compact", "session-end")
# Seconds a hook may spend before it gives up (Claude Code kills hooks at 60 s by default;
# an agent waits on session-start and prompt, so those must be quick).
LIMITS = {"session-start": 5.0, "prompt": 4.0, "stop": 20.0, "pre-compact": 20.0,
          "session-end": 1.0, "background": 120.0}


class _TimeUpError(Exception):
    pass


def _home() -> Path:
    from memdir.core.config import resolve_home

    return resolve_home(None)


def _log(event: str, message: str, home: Path | None = None) -> None:
    """Append one line to the hook log (of ``home``, else the one in use); never raises."""
    try:
        from memdir.core.safe_open import open_append, real_folder

        home = home or _home()
        home.mkdir(parents=True, exist_ok=True)
        # Never through a symlinked logs/ or hooks.log: the line would land in another file.
        logs = real_folder(home, "logs", create=True) or home / "logs"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with os.fdopen(open_append(logs / "hooks.log"), "a", encoding="utf-8") as fh:
            fh.write(f"{stamp} [{os.getpid()}] {event}: {message}\n")
    except Exception:  # the log is best effort; the agent must not notice
        pass


def _disabled(home: Path | None = None) -> bool:
    """``MEMDIR_DISABLE=1``, or ``[hooks] enabled = false`` in the config of ``home`` (else
    of the home in use)."""
    if os.environ.get("MEMDIR_DISABLE", "").strip() not in ("", "0", "false", "no"):
        return True
    try:
        from memdir.core.config import read_toml

        hooks = read_toml((home or _home()) / "config.toml").get("hooks", {})
    except Exception:
        return False
    return isinstance(hooks, dict) and hooks.get("enabled") is False


def _payload(raw: str) -> dict[str, Any]:
    data = json.loads(raw) if raw.strip() else {}
    if not isinstance(data, dict):
        raise ValueError("the hook input is not a JSON object")
    return data


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def _project(data: Mapping[str, Any]) -> str:
    """The project directory, absolute: the agent's ``cwd`` if it is one, else this process's
    (the daemon resolves nothing itself: it runs in whichever project started it)."""
    cwd = _text(data, "cwd")
    return os.path.abspath(cwd if cwd and Path(cwd).is_dir() else os.getcwd())


def _memdir(data: Mapping[str, Any]) -> Memdir:
    from memdir.memdir import Memdir

    # No model in a hook process (0.4 s to load): the warm daemon does semantic recall.
    return Memdir(project=_project(data), semantic=False)


def _session_start(data: Mapping[str, Any], fmt: str) -> str:
    from memdir.agents.hook_events import output, start_text

    with _memdir(data) as md:
        text = start_text(md, _text(data, "session_id")) or ""
    _warm()  # the next hooks of the session find the daemon
    return output("session-start", text, fmt)


def _prompt(data: Mapping[str, Any], fmt: str) -> str:
    from memdir.agents.hook_events import output, prompt_text

    prompt, session = _text(data, "prompt"), _text(data, "session_id")
    if not prompt or not session:
        return ""
    with _memdir(data) as md:
        text = prompt_text(md, prompt, session) or ""
    _warm()
    return output("prompt", text, fmt)


def _warm() -> None:
    """Start the warm daemon for the next hooks (unless ``MEMDIR_DAEMON=0``); this hook ran
    in its own process because none answered (:mod:`memdir.agents.hook_client`)."""
    if os.environ.get("MEMDIR_HOOK_BACKGROUND") or not hasattr(os, "getuid"):
        return  # no daemon where there are no Unix sockets and uids (Windows)
    from memdir.agents import daemon

    try:
        daemon.start_daemon(_home())
    except Exception as exc:  # the answer is computed: never lose it to the daemon
        _log("daemon", f"not started: {exc.__class__.__name__}: {exc}")


def _by_daemon(event: str, raw: str, fmt: str, asked: bool) -> str | None:
    """The warm daemon's answer to ``event`` for the home resolved the full way, unless the
    start-up path (:func:`memdir.cli.main.main`) ``asked`` already; an unsafe socket
    directory, which that path passes over in silence, is warned about here."""
    from memdir.agents.daemon import listening
    from memdir.agents.hook_client import ask_daemon

    home = _home()
    if not hasattr(os, "getuid") or not listening(home) or asked:  # none, or unsafe (warned)
        return None
    answer = ask_daemon(event, fmt, str(home), raw.encode("utf-8", "surrogateescape"))
    return None if answer is None else answer.decode("utf-8", "replace").removesuffix("\n")


def _extract(data: Mapping[str, Any]) -> None:
    """Extraction from what is new in the transcript (:mod:`memdir.agents.hook_transcript`)."""
    from memdir.agents.hook_transcript import claim_window, read_for_extract

    with _memdir(data) as md:
        reading = read_for_extract(md, _text(data, "transcript_path"),
                                   _text(data, "session_id"),
                                   _text(data, "last_assistant_message"))
        _log_window("extract", reading)
        if not claim_window(md, reading):
            _log("extract", "another hook read this stretch of the transcript first")
            return
        _record_uses(md, "extract", reading)
        report = md.extract(reading.transcript, session_id=reading.session_id or None)
    _log("extract", f"{len(report.stored)} stored, {len(report.reinforced)} reinforced, "
                    f"{len(report.skipped)} skipped ({report.method})")


def _record_uses(md: Memdir, event: str, reading: Any) -> None:
    """Count the injected memories the agent drew on in this stretch (:mod:`memdir.capture.uses`);
    uses left unknown (a failure, the time limit, a stretch unread) leave them unchecked."""
    from memdir.capture.uses import mark_unchecked
    if not reading.session_id:
        return
    try:
        used = md.record_uses(reading.session_id, reading.transcript)
    except BaseException as exc:  # usage is a signal; extraction goes on without it
        mark_unchecked(md.index, reading.session_id)
        if isinstance(exc, _TimeUpError) or not isinstance(exc, Exception):
            raise  # the time limit ends the hook here too: run_hook logs it, exits 0
        return _log(event, f"uses not counted ({exc.__class__.__name__}: {exc})")
    if reading.window.unread:  # what the agent did in the stretch left unread is unknown
        mark_unchecked(md.index, reading.session_id)
    if used:
        _log(event, f"{used} injected memories used")


def _log_window(event: str, reading: Any) -> None:
    """Say what a read left out: an old stretch over the budget, over-long lines, the rest
    of the file past the deadline."""
    window = reading.window
    if window.unread:
        _log(event, f"{window.unread} bytes of the transcript before its last "
                    f"{window.end - window.start} were left unread (too much at once)")
    if window.long_lines:
        _log(event, f"{window.long_lines} over-long transcript lines skipped")
    if not window.complete:
        _log(event, f"read stopped at byte {window.end} of {window.size} (time limit); "
                    "the next hook goes on from there")


def _session_end(data: Mapping[str, Any]) -> None:
    import dataclasses

    from memdir.agents.hook_transcript import claim_window, read_for_extract, read_for_index
    from memdir.capture.sessions import index_session

    path = _text(data, "transcript_path")
    tail = read_for_index(path)
    _log_window("session-end", tail)
    session = _text(data, "session_id") or tail.session_id
    with _memdir(data) as md:
        indexed = index_session(md.index, md.directory("project").key, tail.transcript,
                                session, path)
        del tail
        reading = read_for_extract(md, path, session)
        claimed = claim_window(md, reading)
        if claimed:
            _record_uses(md, "session-end", reading)
        report = md.extract(reading.transcript if claimed else dataclasses.replace(
            reading.transcript, messages=()), session_id=reading.session_id or None)
        dreamt = md.dream()
    _log("session-end", f"indexed {indexed.chunks} chunks; {len(report.stored)} stored; "
                        f"dream: {dreamt.reason}")


def _llm_configured() -> bool:
    try:
        from memdir.llm.client import llm_settings

        return llm_settings(_home()).provider != "none"
    except Exception:
        return False


def _detach(event: str, data: Mapping[str, Any]) -> None:
    """Run ``event`` in a new background process and return at once."""
    import subprocess  # here, not at the top: 6 ms of every hook start that never detaches

    env = {**os.environ, "MEMDIR_HOOK_BACKGROUND": event}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memdir", "hook", event], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        start_new_session=True, close_fds=True)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(dict(data)).encode("utf-8"))
    proc.stdin.close()  # the child reads it; we do not wait for it


def _dispatch(event: str, data: Mapping[str, Any], fmt: str) -> str:
    background = os.environ.get("MEMDIR_HOOK_BACKGROUND") == event
    if event == "session-start":
        return _session_start(data, fmt)
    if event == "prompt":
        return _prompt(data, fmt)
    if event in ("stop", "pre-compact"):
        if data.get("stop_hook_active") is True:
            return ""
        if _llm_configured() and not background:
            _detach(event, data)
        else:
            _extract(data)
        return ""
    if background:
        _session_end(data)
    else:
        _detach(event, data)
    return ""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _TimeUpError


def run_hook(event: str, stdin: TextIO | str, fmt: str = "text", asked: bool = False) -> int:
    """Run one hook event on the agent's JSON (read from ``stdin`` within the time limit);
    print the output; always return 0. The warm daemon answers session-start and prompt
    when it can (unless ``asked`` already); else this process computes them."""
    started = time.monotonic()
    if event not in EVENTS:
        _log(event, f"unknown hook event (known: {', '.join(EVENTS)})")
        return 0
    if _disabled():
        return 0
    background = os.environ.get("MEMDIR_HOOK_BACKGROUND") == event
    limit = LIMITS["background" if background else event]
    previous = signal.signal(signal.SIGALRM, _alarm) if hasattr(signal, "SIGALRM") else None
    if previous is not None:
        signal.setitimer(signal.ITIMER_REAL, limit)
    from memdir.core import index
    from memdir.core.errors import warnings_to

    # The alarm cannot interrupt SQLite's wait for another writer (30 s): capped too.
    index.set_deadline(started + limit)
    warnings_to(lambda message: _log(event, message))  # not stderr: the agent reads it
    try:
        raw = stdin if isinstance(stdin, str) else ("" if stdin.isatty() else stdin.read())
        answer = None if event not in ("session-start", "prompt") else _by_daemon(
            event, raw, fmt, asked)
        output = answer if answer is not None else _dispatch(event, _payload(raw), fmt)
    except _TimeUpError:
        _log(event, f"gave up after {limit:.0f} s; the agent goes on without memdir")
        return 0
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return 0
        from memdir.core.errors import MemdirError

        if isinstance(exc, MemdirError):  # refused input (a hostile transcript): no bug
            _log(event, f"{exc.__class__.__name__}: {exc.message} (hint: {exc.hint})")
            return 0
        import traceback  # only when something went wrong

        _log(event, f"{exc.__class__.__name__}: {exc}\n"
                    + "".join(traceback.format_exception(exc)).rstrip())
        return 0
    finally:
        index.set_deadline(None)
        warnings_to(None)
        if previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if output:
        try:
            sys.stdout.write(output + "\n")
            sys.stdout.flush()
        except OSError as exc:  # the agent closed the pipe
            _log(event, f"output not delivered: {exc}")
    if os.environ.get("MEMDIR_DEBUG"):
        sys.stderr.write(f"memdir hook {event}: {time.monotonic() - started:.3f}s\n")
    return 0


def hook_main(argv: list[str], raw: bytes | None = None) -> int:
    """``memdir hook [--home DIR] [--format text|json] EVENT`` (options anywhere, also before
    ``hook``) without argparse: a hook must exit 0 even on arguments it does not understand,
    and start as fast as possible. ``--project DIR`` is taken and ignored (the agent's
    ``cwd`` names the project); other options are ignored. ``raw``: the agent's JSON, when
    the start-up path read it and asked the daemon already (:mod:`memdir.agents.hook_client`)."""
    try:
        from memdir.agents.hook_client import hook_options

        options, words = hook_options(argv)
        if options.get("--home"):
            os.environ["MEMDIR_HOME"] = options["--home"]
        fmt = "json" if options.get("--format") == "json" else "text"
        stdin = sys.stdin if raw is None else raw.decode("utf-8", "surrogateescape")
        return run_hook(words[0] if words else "", stdin, fmt, asked=raw is not None)
    except BaseException as exc:  # the agent must never see memdir fail
        _log("hook", f"{exc.__class__.__name__}: {exc}")
        return 0
