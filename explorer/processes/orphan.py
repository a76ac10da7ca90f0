"""A process the supervisor started ends when the supervisor's process is gone.

Each child leads its own process group (:mod:`.watch`), so a launcher killed from outside
(``SIGKILL``, the OOM killer) took none of its ranks with it: they ran on into a folder nobody
held, and a second run into that folder read the first run's late lines and result as its own.
The launcher puts its pid in each pipeline rank's environment (:data:`LAUNCHER_PID`); a child that
calls :func:`end_with_launcher` first thing (before it imports torch, which takes seconds)
ends itself once its parent is no longer that process.

The variable is taken out of the environment as it is read: what the child starts in turn (a
compiler's workers, a user's helper) has another parent and must not end by this rule.
Processes started another way (``torchrun``, a user's script) carry no such variable, and the
rule does not apply to them.
"""

from __future__ import annotations

import os
import threading
import time

#: Set by the supervisor in each child's environment: the pid of the process that started it.
LAUNCHER_PID = "EXPLORER_LAUNCHER_PID"
#: How often the child looks at its parent (seconds).
POLL_S = 0.5
#: The exit status of a child that ended because its launcher was gone (nobody reads it).
ORPHANED = 75


def end_with_launcher(poll_s: float = POLL_S) -> bool:
    """Watch, from a daemon thread, that the launcher named in the environment is still this
    process's parent, and end this process at once (no clean-up: it may be mid-write to a
    folder no one holds) when it is not. Returns whether a launcher was named."""
    said = os.environ.pop(LAUNCHER_PID, "")
    if not said.isdigit():
        return False
    launcher = int(said)

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(poll_s)
        os._exit(ORPHANED)

    threading.Thread(target=watch, name="explorer-launcher-watch", daemon=True).start()
    return True


__all__ = ["LAUNCHER_PID", "ORPHANED", "POLL_S", "end_with_launcher"]
