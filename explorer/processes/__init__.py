"""The one process supervisor every engine and runner uses (see :mod:`.watch`, :mod:`.engine`).

An engine says which processes to start and how to read their reports (:class:`Engine`,
:class:`Child`, :class:`Report`); :func:`supervise` starts them in process groups of their own,
streams their reports, gives the others a grace to report after a failure or a stall, kills
only its own groups, and returns every exit status with what each process reported
(:class:`Supervised`). :mod:`.ranks` builds ``torchrun``'s environment for local ranks.
No torch here: the XLA parent and the CLI import this without it.
"""

from explorer.processes.engine import GRACE_S, Child, Engine, Report
from explorer.processes.ranks import free_port, process_state, python_path, rank_env
from explorer.processes.watch import Ending, Exit, Supervised, Supervisor, supervise

__all__ = [
    "GRACE_S",
    "Child",
    "Ending",
    "Engine",
    "Exit",
    "Report",
    "Supervised",
    "Supervisor",
    "free_port",
    "process_state",
    "python_path",
    "rank_env",
    "supervise",
]
