"""Instruction counts of a whole process under callgrind (``--instructions`` in core.py and
recall.py): the CPU work of a process, whatever the speed or load of the machine.

Wall times on the development VM swing by 2-4x from one hour to the next (the loop time the
benches print), so a process-time target can pass or fail with no change to the code. The
number of instructions the process executes does not move with the machine: the same code on
the same store gives the same count within a fraction of a percent. It leaves out the time
spent in the kernel (stat calls, file reads), so it complements the wall time, not replaces it.
Needs valgrind (Debian's ``valgrind`` package); without it the count is ``None``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["count_instructions"]

_COLLECTED = re.compile(r"Collected\s*:\s*([0-9]+)")


def count_instructions(command: Sequence[str], *, env: Mapping[str, str],
                       cwd: Path) -> float | None:
    """Millions of instructions ``command`` executes (after one untimed run that warms the
    bytecode cache), or None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    subprocess.run(list(command), env=dict(env), cwd=cwd, check=True, capture_output=True)
    done = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           *command], env=dict(env), cwd=cwd, check=True, capture_output=True,
                          text=True)
    found = _COLLECTED.search(done.stderr)
    return None if found is None else int(found.group(1)) / 1e6
