"""The CLI's name for :mod:`explorer.processes.isolate` (user code in a child process with a timeout)."""

from explorer.processes.isolate import INPUT_ERROR, MARKER, Outcome, run_child

__all__ = ["INPUT_ERROR", "MARKER", "Outcome", "run_child"]
