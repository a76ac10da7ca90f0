"""Why a job stopped moving: per-rank states in, one verdict in the schedule's words out.

Each rank is a :class:`RankState` (what it does, with whom, where in the schedule, since when),
read from a live stack (:mod:`.stacks`) or, where no stack could be taken, from what the rank
wrote itself. The verdict follows the waits from rank to rank:

- **a wait-for cycle**: ranks that each wait on the next, around a loop, in exchanges that can
  never pair (two sends, two receives, or a receive whose sender waits elsewhere); where the
  schedule is known the cycle is also the analysis' own :class:`~.findings.Deadlock` record;
- **the rank everyone waits on**: the end of the chains of waits, a rank that is gone,
  sleeping, stuck or computing in user code, with what it is doing;
- **no wait**: no rank waits on another (all computing, say): not a hang this tool can name;
- **finished**: every rank ran to its end (a run folder read after a good run): no hang at all.

Two ranks that wait on each other in a send and its matching receive are a rendezvous under
way, not a cycle. Pure python: states are data (tests build them by hand).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, Optional, Sequence, cast

from explorer.pipeline.analysis.findings import MODELS, Deadlock, P2PModel, Ref, Waiting
from explorer.pipeline.analysis.refs import ref
from explorer.pipeline.analysis.stacks import Activity, StackReading
from explorer.pipeline.schedules.instructions import KIND_BY_DEEPSPEED_NAME, Kind
from explorer.pipeline.schedules.schedule import Schedule

#: Sources that saw the rank's stack: live (``stack``), saved by ``--save`` or py-spy
#: (``saved``), or printed as the rank ended (``traceback``).
SEEN = ("stack", "saved", "traceback")
VerdictKind = Literal[
    "cycle", "waits-on", "collective-mismatch", "no-wait", "finished", "moving", "starting"
]
_SENDS = ("send", "isend", "send_object_list")
_RECVS = ("recv", "irecv", "recv_object_list")


@dataclass(frozen=True)
class RankState:
    """One rank, as the doctor saw it (see the module docstring)."""

    rank: int
    pid: Optional[int]
    activity: Activity
    op: str = ""  # the torch.distributed call it waits in ("" when not waiting)
    peer: Optional[int] = None  # the rank on the other end of that call
    tag: Optional[int] = None
    at: Optional[Ref] = None  # the schedule's instruction it is in (or was in last)
    microbatch: int = -1
    where: str = ""  # the innermost file:line outside the libraries
    since_s: Optional[float] = None  # seconds since the rank last wrote progress
    source: str = (
        "stack"  # "stack" (live), "saved"/"traceback" (left as text), "log" (its own file)
    )
    engine: str = ""  # the pipeline engine read from the frames: "explorer", "deepspeed" or ""
    note: str = ""  # planted fault, last line written, why no stack...
    #: The one stage the rank holds, where the schedule says so: it names the rank in the
    #: schedule's words even when no instruction places it (stopped between iterations, in
    #: the barrier that starts one).
    stage: Optional[int] = None

    def doing(self) -> str:
        """What the rank does, in words: ``waits in RecvGrad of micro-batch 3 from stage 2 (rank 2)``."""
        ins = self._instruction()
        if self.activity == "waiting":
            peer = "" if self.peer is None else f" {self._direction()} {self._peer()}"
            call = f"dist.{self.op}" if self.op != "wait" else "a wait on posted transfers"
            verb = "waits" if self.source == "stack" else "waited"  # the past
            return f"{verb} in {ins or call}{peer}" + (f" ({call})" if ins else "")
        if self.activity == "gone":
            return "is gone" + (f" (last in {ins})" if ins else "")
        if self.activity == "starting":
            return "has not written its start line yet (its launcher runs)"
        if self.activity == "unseen":
            return "could not be seen" + (f" (last wrote {ins})" if ins else "")
        if self.activity == "done":
            return "had completed every collective it entered"
        if self.activity == "finished":
            return "finished its run"
        verb = {
            "sleeping": "sleeps",
            "idle": "is blocked",
            "computing": "computes",
            "compiling": "is still compiling (torch.compile)",
            "stopped": "stands stopped by a signal (SIGSTOP, SIGTSTP or Ctrl-Z; state T)",
        }[self.activity]
        return f"{verb} at {self.where or '?'}" + (f" in {ins}" if ins else "")

    def describe(self) -> str:
        since = "" if self.since_s is None else f", no progress for {self.since_s:.0f} s"
        if self.activity == "finished":  # not a stall: its last line is its end
            since = "" if self.since_s is None else f" {self.since_s:.0f} s ago"
        note = f" [{self.note}]" if self.note else ""
        return f"{self._who()} {self.doing()}{since}{note}"

    @property
    def named_stage(self) -> Optional[int]:
        """The stage the rank is named by: its instruction's, else the one it holds (or None)."""
        return self.stage if self.at is None else self.at.stage

    def _who(self) -> str:
        if self.named_stage is None:
            return f"rank {self.rank}"
        return f"stage {self.named_stage} (rank {self.rank})"

    def _instruction(self) -> str:
        if self.at is None:
            return ""
        mb = f" of micro-batch {self.microbatch}" if self.microbatch >= 0 else ""
        name = self.at.deepspeed_repr.split("(")[0]
        return f"{name}{mb} (step {self.at.step}, {self.at.deepspeed_repr})"

    def _peer(self) -> str:
        """``stage 2 (rank 2)`` where the instruction names the peer stage, else ``rank 2``."""
        if self.at is None:
            return f"rank {self.peer}"
        kind = KIND_BY_DEEPSPEED_NAME.get(self.at.deepspeed_repr.split("(")[0])
        if kind is None or not kind.is_p2p:
            return f"rank {self.peer}"
        return f"stage {peer_stage(self.at.stage, kind)} (rank {self.peer})"

    def _direction(self) -> str:
        return "from" if self.op in _RECVS else "to" if self.op in _SENDS else "with"

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "pid": self.pid,
            "stage": self.named_stage,
            "activity": self.activity,
            "op": self.op or None,
            "peer": self.peer,
            "instruction": None
            if self.at is None
            else {**self.at.to_dict(), "microbatch": self.microbatch},
            "where": self.where or None,
            "since_s": self.since_s,
            "source": self.source,
            "engine": self.engine or None,
            "note": self.note or None,
            "description": self.describe(),
        }


@dataclass(frozen=True)
class CollectiveMismatch:
    """Ranks of one group that entered different collectives (or a different number of them).

    ``how``: ``op`` (different calls at one position), ``sizes`` (one call, other shapes) or
    ``count`` (some ranks entered a collective the others never did). ``calls`` holds each
    rank's call at that position: (rank, op, file:line, how many of that op it had entered,
    None where unknown). ``lost`` says where a rank's ring buffer no longer held the start.
    """

    group: str
    how: str
    calls: tuple[tuple[int, str, str, Optional[int]], ...]
    seq: Optional[int] = None  # the collective's number on its group (Flight Recorder)
    text: str = ""
    lost: str = ""

    def to_dict(self) -> dict:
        return {
            "group": self.group,
            "how": self.how,
            "seq": self.seq,
            "calls": [
                {"rank": r, "op": op or None, "where": where or None, "count": n}
                for r, op, where, n in self.calls
            ],
            "lost": self.lost or None,
            "description": self.text,
        }


@dataclass(frozen=True)
class HangVerdict:
    """The doctor's answer: the cycle, or the rank the others wait on, with every rank's state."""

    verdict: VerdictKind
    ranks: tuple[RankState, ...]
    cycle: tuple[int, ...] = ()  # ranks around the loop, in wait order
    culprit: Optional[int] = None  # the rank everyone waits on
    waiting: tuple[int, ...] = ()  # the ranks whose waits end at the culprit
    deadlock: Optional[Deadlock] = None  # the cycle as the analysis' record, where placed
    unseen: tuple[int, ...] = field(default=())  # ranks with no stack (log or nothing only)
    mismatch: Optional[CollectiveMismatch] = None  # ranks in different collectives

    def state(self, rank: int) -> RankState:
        return next(s for s in self.ranks if s.rank == rank)

    @property
    def quiet_s(self) -> Optional[float]:
        """Seconds since any rank last wrote progress (None where no rank writes any).

        A stack is one moment: a job that is only slow can show the same waits. A short quiet
        time says the job was still moving a moment ago; the verdict is then a snapshot.
        """
        times = [s.since_s for s in self.ranks if s.since_s is not None]
        return min(times) if times else None

    def describe(self) -> str:
        if self.verdict == "cycle":
            loop = "; ".join(f"{self.state(r)._who()} {self.state(r).doing()}" for r in self.cycle)
            return f"wait-for cycle: {loop}"
        if self.verdict == "waits-on" and self.culprit is not None:
            others = ", ".join(str(r) for r in self.waiting)
            several = len(self.waiting) > 1
            who = f"ranks {others} wait" if several else f"rank {others} waits"
            return f"{who} on rank {self.culprit}: {self.state(self.culprit).describe()}"
        if self.verdict == "collective-mismatch" and self.mismatch is not None:
            unseen = ", ".join(map(str, self.unseen))
            return self.mismatch.text + (
                f" (not seen: rank{'s' if len(self.unseen) > 1 else ''} {unseen})" if unseen else ""
            )
        if self.verdict == "finished":
            return f"the run finished: all {len(self.ranks)} ranks ran to their end; nothing hangs"
        if self.verdict == "starting":
            late = ", ".join(str(s.rank) for s in self.ranks if s.activity == "starting")
            return (
                f"the job is starting: its launcher runs, and rank(s) {late} have not written "
                "their start line yet; nothing to diagnose before they do"
            )
        if self.verdict == "moving":
            return (
                "the job is moving: its ranks wrote progress while they were read, so the waits "
                "their stacks showed passed (a stack is one moment); nothing hangs"
            )
        return "no rank waits on another: " + "; ".join(s.describe() for s in self.ranks)

    def to_dict(self) -> dict:
        return {
            "kind": "hang",
            "verdict": self.verdict,
            "description": self.describe(),
            "cycle": list(self.cycle),
            "culprit": self.culprit,
            "waiting": list(self.waiting),
            "deadlock": None if self.deadlock is None else self.deadlock.to_dict(),
            "unseen": list(self.unseen),
            "mismatch": None if self.mismatch is None else self.mismatch.to_dict(),
            "quiet_s": self.quiet_s,
            "ranks": [s.to_dict() for s in self.ranks],
        }


# -- placing a reading in the schedule --------------------------------------------------------


def peer_stage(stage: int, kind: Kind) -> int:
    """The stage on the other end of a P2P instruction (activations go up, gradients down)."""
    return stage + 1 if kind in (Kind.SEND_ACTIVATION, Kind.RECV_GRAD) else stage - 1


def locate(
    schedule: Schedule, rank: int, reading: StackReading, after_step: int = -1
) -> Optional[int]:
    """The schedule row a rank's reading points at, or None where the stack does not say.

    The explorer's engine gives the step; the kind (and peer stage) pick the instruction inside
    it, else its first one. DeepSpeed's engine gives kind and buffer but no step: the first such
    instruction after ``after_step`` (the last step the rank is known to have finished).
    """
    if reading.step is None and reading.kind is None:
        return None
    sl = schedule.rank_slice(rank)
    rows = [
        i
        for i in range(sl.start, sl.stop)
        if (reading.step is None and int(schedule.step[i]) > after_step)
        or int(schedule.step[i]) == reading.step
    ]
    if reading.kind is not None:
        rows = [i for i in rows if int(schedule.kind[i]) == reading.kind]
    if reading.buffer is not None:
        rows = [i for i in rows if int(schedule.buffer[i]) == reading.buffer]
    if reading.peer_stage is not None and reading.kind is not None and reading.kind.is_p2p:
        peered = [
            i
            for i in rows
            if peer_stage(int(schedule.stage[i]), reading.kind) == reading.peer_stage
        ]
        rows = peered or rows
    return rows[0] if rows else None


def first_row_of_step(schedule: Schedule, rank: int, step: int) -> Optional[int]:
    """The rank's first instruction at ``step`` or later (where a rank that stopped after ``step - 1`` was)."""
    sl = schedule.rank_slice(rank)
    return next((i for i in range(sl.start, sl.stop) if int(schedule.step[i]) >= step), None)


def placed(schedule: Schedule, row: Optional[int]) -> tuple[Optional[Ref], int]:
    """The row as a :class:`Ref` and its micro-batch ((None, -1) without a row)."""
    if row is None:
        return None, -1
    return ref(schedule, row), int(schedule.microbatch[row])


# -- the verdict --------------------------------------------------------------------------------


def diagnose(states: Sequence[RankState], model: str = "blocking") -> HangVerdict:
    """The verdict on ``states`` (see the module docstring)."""
    ranks = tuple(sorted(states, key=lambda s: s.rank))
    by_rank = {s.rank: s for s in ranks}
    unseen = tuple(s.rank for s in ranks if s.source not in SEEN)
    if ranks and all(s.activity == "finished" for s in ranks):
        return HangVerdict("finished", ranks, unseen=unseen)
    mismatch = collectives_apart(ranks)
    if mismatch is not None:
        return HangVerdict("collective-mismatch", ranks, mismatch=mismatch, unseen=unseen)
    edges = _wait_edges(by_rank)
    cycle = _find_cycle(edges, by_rank)
    if cycle:
        return HangVerdict(
            "cycle", ranks, cycle=cycle, deadlock=_as_deadlock(cycle, by_rank, model), unseen=unseen
        )
    ends = Counter()
    chains: dict[int, list[int]] = {}
    for start in edges:
        for end in _chain_ends(start, edges, by_rank):
            ends[end] += 1
            chains.setdefault(end, []).append(start)
    if not ends:
        return HangVerdict("no-wait", ranks, unseen=unseen)
    culprit = max(ends, key=lambda r: (ends[r], _stuckness(by_rank.get(r)), -r))
    return HangVerdict(
        "waits-on",
        ranks,
        culprit=culprit,
        waiting=tuple(sorted(set(chains[culprit]))),
        unseen=unseen,
    )


def collectives_apart(ranks: Sequence[RankState]) -> Optional[CollectiveMismatch]:
    """Ranks waiting in different collectives (live: no peer, no count), else None.

    Each rank's call is its op and the user's line; the fewest ranks sharing a call are named
    first (the odd one out: one more ``all_reduce`` while the others wait in a ``barrier``).
    """
    waits = [
        s for s in ranks if s.activity == "waiting" and s.peer is None and s.op not in ("", "wait")
    ]
    calls: dict[tuple[str, str], list[int]] = {}
    for s in waits:
        calls.setdefault((s.op, s.where), []).append(s.rank)
    if len(waits) < 2 or len({op for op, _ in calls}) < 2:
        return None
    groups = sorted(calls.items(), key=lambda kv: (len(kv[1]), kv[1]))
    parts = [
        f"{_ranks_word(rs)} wait{'s' if len(rs) == 1 else ''} in {op}{f' ({where})' if where else ''}"
        for (op, where), rs in groups
    ]
    text = "; ".join(parts) + ": different collectives, so none of them can complete"
    return CollectiveMismatch(
        group="?",
        how="op",
        calls=tuple((s.rank, s.op, s.where, None) for s in waits),
        text=text,
    )


def _ranks_word(ranks: Sequence[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, sorted(ranks)))}"


def _wait_edges(by_rank: dict[int, RankState]) -> dict[int, tuple[int, ...]]:
    """Who each waiting rank waits on: its peer, or, in a collective, every rank not in the same call."""
    edges: dict[int, tuple[int, ...]] = {}
    for r, s in by_rank.items():
        if s.activity != "waiting":
            continue
        if s.peer is not None:
            edges[r] = (s.peer,)
        elif s.op and s.op != "wait":
            edges[r] = tuple(o for o, t in by_rank.items() if o != r and t.op != s.op)
    return edges


def _pairs(a: RankState, b: RankState) -> bool:
    """True when a and b stand in the two ends of one exchange (a rendezvous under way)."""
    if a.peer != b.rank or b.peer != a.rank:
        return False
    ends = {a.op in _SENDS and b.op in _RECVS, a.op in _RECVS and b.op in _SENDS}
    same_tag = a.tag is None or b.tag is None or a.tag == b.tag
    return True in ends and same_tag


def _find_cycle(
    edges: dict[int, tuple[int, ...]], by_rank: dict[int, RankState]
) -> tuple[int, ...]:
    """The first loop of single-peer waits (ranks in wait order), or () when none."""
    for start in sorted(edges):
        path: list[int] = []
        r: Optional[int] = start
        while r is not None and r not in path:
            path.append(r)
            nxt = edges.get(r, ())
            r = nxt[0] if len(nxt) == 1 else None
        if r is None:
            continue
        loop = tuple(path[path.index(r) :])
        if len(loop) == 2 and _pairs(by_rank[loop[0]], by_rank[loop[1]]):
            continue
        return _rotate(loop)
    return ()


def _rotate(loop: tuple[int, ...]) -> tuple[int, ...]:
    """The loop starting at its lowest rank, so the same cycle always reads the same."""
    i = loop.index(min(loop))
    return loop[i:] + loop[:i]


def _chain_ends(
    start: int, edges: dict[int, tuple[int, ...]], by_rank: dict[int, RankState]
) -> set[int]:
    """The ranks that the waits from ``start`` lead to and that wait on nobody themselves."""
    out, seen, todo = set(), {start}, [start]
    while todo:
        r = todo.pop()
        for nxt in edges.get(r, ()):
            if nxt in seen:
                continue
            seen.add(nxt)
            if nxt in edges and not _pairs(by_rank[r], by_rank[nxt]):
                todo.append(nxt)
            elif nxt not in edges:
                out.add(nxt)
    return out


def _stuckness(state: Optional[RankState]) -> int:
    """Ties between ends: a gone rank before a sleeping one before one that computes."""
    order = {
        "gone": 5,
        "stopped": 5,
        "unseen": 4,
        "sleeping": 3,
        "idle": 2,
        "compiling": 1,
        "computing": 1,
    }
    return 6 if state is None else order.get(state.activity, 0)


def _as_deadlock(
    cycle: tuple[int, ...], by_rank: dict[int, RankState], model: str
) -> Optional[Deadlock]:
    """The cycle as the analysis' :class:`Deadlock`, when every rank in it is placed in the schedule."""
    waits = []
    for i, r in enumerate(cycle):
        at = by_rank[r].at
        if at is None:
            return None
        nxt = by_rank[cycle[(i + 1) % len(cycle)]]
        waits.append(Waiting(at, nxt.rank, None if nxt.at is None else nxt.at.stage))
    p2p = cast(P2PModel, model if model in MODELS else "blocking")
    return Deadlock(p2p, cycle=tuple(waits), stuck=tuple(waits))


__all__ = [
    "Activity",
    "CollectiveMismatch",
    "collectives_apart",
    "HangVerdict",
    "RankState",
    "diagnose",
    "first_row_of_step",
    "locate",
    "peer_stage",
    "placed",
]
