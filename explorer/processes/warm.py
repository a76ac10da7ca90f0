"""The supervisor's side of warm starts (:mod:`.template`): which children may be forked from
one template, and a handle per forked rank that answers what a ``Popen`` answers.

Children are forked only where nothing a rank's imports read can differ: the engine asked for
it (``Child.warm``), two or more of them run one ``python -m WORKER ARGS`` command line in one
folder with their logs as output, and their environments differ in no variable but those of
:data:`OWN_VARIABLES`, which torch reads when a process group starts, never at import. Any
other run starts each child from a fresh interpreter, as before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import IO, Mapping, Optional, Sequence

from explorer.processes.engine import Child

__all__ = [
    "OWN_VARIABLES",
    "PAD_VARIABLE",
    "ForkedRank",
    "Template",
    "exit_status",
    "kill_group",
    "kill_rank",
    "warm_plan",
]

#: The variables in which forked ranks may differ from one another.
OWN_VARIABLES = frozenset({"RANK", "LOCAL_RANK"})
#: The environment's last variable in the template: room each rank fills with its own variables.
PAD_VARIABLE = "EXPLORER_RANK_ENV_PAD"
#: How long the supervisor waits for a template to kill and reap its ranks before it kills it.
REAP_S = 30.0


def template_env(common: Mapping[str, str], room: int) -> dict[str, str]:
    """The template's environment: what every rank shares, then ``room`` bytes of padding last
    (Python passes a dict's items to ``execve`` in order, so the padding ends the block)."""
    env = {k: v for k, v in common.items() if k != PAD_VARIABLE}
    env[PAD_VARIABLE] = "x" * room
    return env


def padding_for(own: Mapping[str, str]) -> int:
    """The padding a rank with these variables of its own needs: ``K=V`` and a NUL each."""
    return sum(len(k) + len(v) + 2 for k, v in own.items())


def exit_status(pid: int, *, reap: bool = False) -> Optional[int]:
    """The exit status of our child ``pid`` once it ended (negative: the signal that ended it),
    else None. Without ``reap`` it is read without reaping (``WNOWAIT``): until it is reaped, a
    process group leader stays a zombie and its group id cannot go to an unrelated process, so a
    last ``SIGKILL`` to the group still reaches only what it left there. With ``reap``: waits."""
    flags = os.WEXITED | (0 if reap else os.WNOWAIT | os.WNOHANG)
    try:
        info = os.waitid(os.P_PID, pid, flags)
    except ChildProcessError:
        return None
    if info is None or info.si_pid == 0:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def kill_group(pid: int) -> None:
    """``SIGKILL`` to the process group ``pid`` leads; a group already gone is left alone."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_rank(pid: int) -> None:
    """``SIGKILL`` to a forked rank and to its process group. The rank itself first: just
    forked, it may not lead its group yet (``setsid`` is its first act), and a rank that is
    dead starts nothing more; then whatever it started in its group."""
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    kill_group(pid)


@dataclass(frozen=True)
class WarmPlan:
    """Children that one template can fork: its environment and each child's own variables."""

    children: tuple[Child, ...]
    env: dict[str, str]
    own: dict[int, dict[str, str]]


def warm_plan(children: Sequence[Child]) -> Optional[WarmPlan]:
    """The template that can fork ``children``, or None where they must start afresh (above)."""
    if len(children) < 2 or not all(c.warm and not c.pipe_stdout for c in children):
        return None
    first = children[0]
    argv = list(first.argv)
    if (
        len(argv) < 3
        or argv[1] != "-m"
        or any(list(c.argv) != argv or c.cwd != first.cwd for c in children)
    ):
        return None
    keys = set().union(*(c.env for c in children))
    common = {
        k: first.env[k] for k in first.env if all(c.env.get(k) == first.env[k] for c in children)
    }
    if not keys - set(common) <= OWN_VARIABLES:
        return None
    own = {c.rank: {k: c.env[k] for k in c.env if k not in common} for c in children}
    room = max(padding_for(v) for v in own.values())
    return WarmPlan(tuple(children), template_env(common, room), own)


class ForkedRank:
    """One rank the template forked: what the supervisor reads of a ``Popen`` (``pid``,
    ``returncode``, ``wait``), and :meth:`ended`, its exit status seen without reaping."""

    def __init__(self, rank: int, template: "Template") -> None:
        self.rank, self.template = rank, template
        self.pid: Optional[int] = None
        self.status: Optional[int] = None
        self.returncode: Optional[int] = None

    def ended(self) -> Optional[int]:
        """Its exit status once it ended (not reaped until the template is done), else None.
        A rank the template never forked, or whose end it never said (it was killed), ended as
        the template did: its ranks end with it (:mod:`.orphan`)."""
        if self.status is None and self.template.silent():
            self.status = self.template.ended()
        return self.status

    def wait(self) -> int:
        """After :meth:`Template.finish`: the status the template reaped (a rank whose end it
        never said ended as it did, or by the supervisor's ``SIGKILL``)."""
        self.template.finish()
        if self.returncode is None:
            code = self.ended()
            self.returncode = code if code is not None else -signal.SIGKILL
        return self.returncode

    def kill_group(self) -> None:
        if self.pid is not None:
            kill_rank(self.pid)


class Template:
    """The template process of one run (:mod:`.template`) and the ranks it forked."""

    def __init__(self, plan: WarmPlan) -> None:
        first = plan.children[0]
        for child in plan.children:
            open(child.log, "wb").close()  # each rank appends: the template writes to the first
        module, args = first.argv[2], list(first.argv[3:])
        with open(first.log, "ab") as log:
            self.proc = subprocess.Popen(
                [first.argv[0], "-m", "explorer.processes.template", module, *args],
                env=plan.env,
                cwd=first.cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        self.ranks = {c.rank: ForkedRank(c.rank, self) for c in plan.children}
        self._finished = threading.Event()
        threading.Thread(target=self._listen, args=(self.proc.stdout,), daemon=True).start()
        requests = "".join(
            json.dumps(
                {
                    "rank": c.rank,
                    "env": plan.own[c.rank],
                    "log": str(c.log),
                    "cwd": c.cwd and str(c.cwd),
                }
            )
            + "\n"
            for c in plan.children
        )
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(requests.encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # it ended already: its ranks end as it did (ForkedRank.ended)

    def _listen(self, stream: IO[bytes]) -> None:
        """Thread: the template's answers, each into its rank's handle (until its end: the
        supervisor waits on that, so nothing here may stop the thread before it)."""
        try:
            for raw in iter(stream.readline, b""):
                word, *numbers = raw.decode("ascii", "replace").split() or [""]
                try:
                    rank, value = self.ranks[int(numbers[0])], int(numbers[1])
                except (ValueError, IndexError, KeyError):
                    continue  # not an answer (the template writes none such)
                if word == "pid":
                    rank.pid = value
                elif word == "exit":
                    rank.status = value
        finally:
            self._finished.set()

    def silent(self) -> bool:
        """Whether the template will say nothing more (its answers ended)."""
        return self._finished.is_set()

    def ended(self) -> Optional[int]:
        """The template's own exit status once it ended, else None."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        return exit_status(self.proc.pid)

    def finish(self) -> None:
        """Tell the template to reap (it kills what is left of its ranks, reaps them and says
        each status), then reap it. Idempotent."""
        if self.proc.returncode is not None:
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.write(b'"reap"\n')
                self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self._finished.wait(timeout=REAP_S)
        if self.proc.poll() is None:
            kill_group(self.proc.pid)
        self.proc.wait()
