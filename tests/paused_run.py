"""A helper for the fault tests: `auditsel ARGV` in a new process that stops at a known point.

`paused_command(argv, chunks)` is the command line of a process that runs `auditsel ARGV` with
every chunk written from the first and, once it has saved `chunks` new chunks, writes
`<checkpoints>/paused` and sleeps, so that a test can SIGKILL it there (a deterministic
mid-run kill). The hook lives here, not in the package: it wraps `Checkpoints.save`."""

import sys

_SCRIPT = """
import os, sys, time
from auditsel.files import atomic_write_bytes
from auditsel.games import engine

pause_after, saved, save = int(sys.argv[1]), [], engine.Checkpoints.save

def paused_save(self, index, scores, member):
    save(self, index, scores, member)
    saved.append(index)
    if len(saved) == pause_after:
        atomic_write_bytes(self.dir / "paused", str(os.getpid()).encode())
        while True:
            time.sleep(60)

engine.Checkpoints.save = paused_save
engine.CHECKPOINT_AFTER = 0.0
from auditsel.cli import main
sys.exit(main(sys.argv[2:]))
"""


def paused_command(argv: list[str], chunks: int) -> list[str]:
    """The command line (module docstring); `argv`: auditsel's arguments (no program)."""
    return [sys.executable, "-c", _SCRIPT, str(chunks), *argv]
