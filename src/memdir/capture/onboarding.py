"""Onboarding (seed 000): the first session of a user with no memories asks who they are.

The agent is told to ask four short questions (role, stack, goals, preferences), to store
each answer as its own user-scope memory, and to keep a ``## User Profile`` section in
CLAUDE.md as a fallback. :func:`write_user_profile` writes that section from the stored
memories.

Invariants:
- Onboarding is due while no memory exists in any scope (seed 000: "when no memories
  exist"; archived ones count: the user was onboarded once).
- CLAUDE.md is never clobbered: memdir owns only the lines between its two markers, replaced
  in place on every write; a file without them gets the section appended at the end; the
  write is atomic.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memdir.core.files import atomic_write
from memdir.core.neutralise import neutralise
from memdir.core.taxonomy import Taxonomy

if TYPE_CHECKING:
    from memdir.memdir import Memdir

__all__ = ["BEGIN", "END", "needs_onboarding", "onboarding_text", "write_user_profile"]

BEGIN = "<!-- memdir:user-profile (generated from your user memories; edit those) -->"
END = "<!-- /memdir:user-profile -->"


def _pick(taxonomy: Taxonomy, *names: str) -> str:
    for name in names:
        spec = taxonomy.lookup(name)
        if spec is not None and not spec.system:
            return spec.name
    return taxonomy.types[0].name


def needs_onboarding(md: Memdir) -> bool:
    """No memory at all (active or archived) in any directory in play. One indexed EXISTS:
    this runs at every session start, and listing would sort a whole store to see one row."""
    md._sync()
    keys = [d.key for d in md._dirs()]
    if not keys:
        return True
    found = md.index.conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM memories WHERE dir IN ({','.join('?' * len(keys))}))",
        keys).fetchone()
    return not found[0]


def onboarding_text(md: Memdir) -> str:
    tax = md.directory("user").taxonomy
    about = _pick(tax, "user", "preference", "preferences", "fact")
    likes = _pick(tax, "preference", "preferences", "user", "feedback")
    return f"""## First session: get to know the user
memdir has no memories yet. Before the task, ask in one short message:
1. their role and team;
2. their tech stack (languages, frameworks, tools);
3. what they are working towards (goals for this project);
4. how they like you to work (style, tools, communication).
Store each answer as its own memory, for example:
  memdir store --scope user --type {about} "Backend engineer on the payments team"
  memdir store --scope user --type {likes} "Prefers small PRs and pnpm over npm"
Then run `memdir onboard --claude-md CLAUDE.md` to keep a `## User Profile` section in
CLAUDE.md as a fallback. If the user would rather skip this, store nothing and go on."""


def _section(md: Memdir) -> str:
    memories = md.list(scopes=["user"], order="relevance")
    lines = [BEGIN, "## User Profile", ""]
    # CLAUDE.md is read as instructions: the memories' text goes in inert (no tags)
    lines += [f"- {' '.join(neutralise(m.body).split())}" for m in memories] \
        or ["- (no user memories yet)"]
    lines.append(END)
    return "\n".join(lines)


def write_user_profile(md: Memdir, path: str | Path) -> Path:
    """Write (or refresh) memdir's ``## User Profile`` section in ``path``."""
    target = Path(path)
    from memdir.core.safe_open import AGENT_FILE, read_file

    try:  # bounded, never from a FIFO: a committed CLAUDE.md can be anything
        current = read_file(target, AGENT_FILE, follow=True).decode("utf-8")
    except FileNotFoundError:
        current = ""
    section = _section(md)
    start, end = current.find(BEGIN), current.find(END)
    if start != -1 and end > start:
        updated = current[:start] + section + current[end + len(END):]
    else:
        updated = (current.rstrip("\n") + "\n\n" if current.strip() else "") + section + "\n"
    if updated != current:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, updated)
    return target
