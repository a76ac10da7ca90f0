"""The critical path of a job of thousands of ranks: through its slowest replica, as measured.

Data-parallel replicas meet at every step, so the job's step is its slowest replica's, and what
decides that replica's step is the chain of instructions that ran back to back without slack:
its critical path. It is read from the measurements, not simulated: in the slowest replica's
last iteration (the first pays for warm-up), the instruction that ended last is the path's end;
walking back, an instruction follows the one before it on its rank, except a receive whose
message's send began after that one ended (or that is its rank's first), which follows the send
on the peer rank: the data, not the rank, held it up. Times of the replica's ranks are put on its first rank's clock
with the offsets the clocks bounded (a rank whose offset is not bounded keeps its own clock, and
the path says so).

The path names the ranks it runs through and how long each holds it, so a straggler on it is
seen costing its time, and one off it is seen costing nothing. The folded view draws it over the
stage lanes, through the cells it visits. Pure numpy; no object per event outside the path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.pipeline.analysis.clocks import Clocks, message_pairs
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.job import JobTrace
from explorer.pipeline.traces.job_folder import JobLayout

_RECEIVES = (int(Kind.RECV_ACTIVATION), int(Kind.RECV_GRAD))


@dataclass(frozen=True, eq=False)
class FoldedPath:
    """The slowest replica's critical path in one iteration, first instruction first."""

    replica: int
    iteration: int
    layout: JobLayout
    rank: np.ndarray
    stage: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    start: np.ndarray  # seconds from the path's first start, on the replica's first rank's clock
    end: np.ndarray
    via_message: np.ndarray  # True where the step came from its message's send on another rank
    own_clocks: tuple[int, ...] = ()  # ranks on the path whose offset was not bounded
    step_s: float = 0.0  # the replica's iteration, first start to last end

    def __len__(self) -> int:
        return len(self.rank)

    @property
    def length_s(self) -> float:
        return float(self.end[-1] - self.start[0]) if len(self) else 0.0

    def held_s(self) -> dict[int, float]:
        """Seconds of the path each rank holds: each step from where the path had reached (the
        latest end before it; its own start, if later) to its own end, so a receive holds only
        the transfer after its send, not the wait beside it, and no time is counted twice: the
        shares add up to the path's length less its gaps."""
        reached = np.maximum.accumulate(np.concatenate(([-np.inf], self.end[:-1])))
        share = np.maximum(self.end - np.maximum(self.start, reached), 0.0)
        out: dict[int, float] = {}
        for r, d in zip(self.rank.tolist(), share.tolist()):
            out[r] = out.get(r, 0.0) + d
        return out

    @property
    def gaps_s(self) -> float:
        """The path's time between its steps: no instruction of the replica ran then on the
        path (dispatch between instructions, or a hop the clocks place within their bounds)."""
        return max(0.0, self.length_s - sum(self.held_s().values()))

    def hops(self) -> list[int]:
        """The ranks the path runs through, in order, each once per visit."""
        out: list[int] = []
        for r in self.rank.tolist():
            if not out or out[-1] != r:
                out.append(r)
        return out

    def sentences(self, named: tuple[int, ...] = ()) -> list[str]:
        """The path in words; ``named`` ranks (the outliers) are said to be on it or off it."""
        if not len(self):
            return []
        hops = self.hops()
        shown = " -> ".join(map(str, hops[:16])) + (" -> ..." if len(hops) > 16 else "")
        held = self.held_s()
        lines = [
            f"critical path: replica {self.replica} (the slowest), iteration {self.iteration}: "
            f"{len(self)} instructions, {self.length_s * 1e3:.2f} ms of its "
            f"{self.step_s * 1e3:.2f} ms step ({self.gaps_s * 1e3:.2f} ms of it between "
            f"instructions), through ranks {shown}"
        ]
        for r in named:
            replica = int(self.layout.replica_of(r))
            if replica != self.replica:
                lines.append(
                    f"  rank {r} is in replica {replica}: not the slowest, so "
                    "it costs the job's step nothing here"
                )
            elif r in held:
                lines.append(f"  rank {r} holds {held[r] * 1e3:.2f} ms of it")
            else:
                lines.append(f"  rank {r} is off it: its slowness costs this step nothing")
        if self.own_clocks:
            lines.append(
                f"  ranks {', '.join(map(str, self.own_clocks))} kept their own clocks "
                "(offsets not bounded): hops to them may be misplaced"
            )
        return lines

    def to_dict(self) -> dict:
        return {
            "replica": self.replica,
            "iteration": self.iteration,
            "length_s": round(self.length_s, 9),
            "step_s": round(self.step_s, 9),
            "hops": self.hops(),
            "held_s": {str(r): round(s, 9) for r, s in self.held_s().items()},
            "gaps_s": round(self.gaps_s, 9),
            "own_clocks": list(self.own_clocks),
            "steps": [
                {
                    "rank": int(self.rank[i]),
                    "stage": int(self.stage[i]),
                    "kind": Kind(int(self.kind[i])).code,
                    "microbatch": int(self.microbatch[i]),
                    "start_s": round(float(self.start[i]), 9),
                    "end_s": round(float(self.end[i]), 9),
                    "via": "message" if self.via_message[i] else "rank",
                }
                for i in range(len(self))
            ],
        }


def slowest_replica(job: JobTrace, iteration: int, on_clock: np.ndarray) -> tuple[int, float]:
    """The replica whose ``iteration`` took longest (first start to last end), and how long."""
    pick = (job.iteration == iteration) & np.isfinite(on_clock) & np.isfinite(job.end)
    rep = job.replica[pick]
    n = job.layout.replicas
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    np.minimum.at(first, rep, on_clock[pick])
    np.maximum.at(last, rep, (on_clock + (job.end - job.start))[pick])
    span = np.where(np.isfinite(first), last - first, -np.inf)
    slowest = int(np.argmax(span))
    return slowest, float(span[slowest])


def _subset(job: JobTrace, keep: np.ndarray) -> JobTrace:
    """The job's instructions where ``keep`` is True (same layout): one replica's iteration is
    paired and walked without touching the rest of a job of millions of instructions."""
    columns = ("rank", "stage", "iteration", "kind", "microbatch", "start", "end")
    return JobTrace(job.layout, *(getattr(job, c)[keep] for c in columns), unix=job.unix)


def _last_whole_iteration(job: JobTrace, timed: np.ndarray) -> int:
    """The last iteration every rank ran through: a rank that was cut short (killed, failed,
    its file cut) left its last iteration partial, and a path through it would end where the
    rank stopped, not where the iteration did. The last one seen when none is whole."""
    last = int(job.iteration[timed].max())
    for u in job.unread:
        if u.kept:
            mine = job.iteration[timed & (job.rank == u.rank)]
            if len(mine):
                last = min(last, int(mine.max()) - 1)
    return last if last >= 0 else int(job.iteration[timed].max())


def folded_path(job: JobTrace, clocked: Clocks) -> FoldedPath | None:
    """The critical path of the job's slowest replica in its last iteration (None: no
    instruction with finite times)."""
    offset = np.nan_to_num(clocked.estimate, nan=0.0)
    on_clock = job.start - offset[job.rank] if len(job) else job.start
    timed = np.isfinite(on_clock) & np.isfinite(job.end)
    if not timed.any():
        return None
    iteration = _last_whole_iteration(job, timed)
    replica, step_s = slowest_replica(job, iteration, on_clock)
    keep = timed & (job.replica == replica) & (job.iteration == iteration)
    mine = _subset(job, keep)
    start = on_clock[keep]
    end = start + (mine.end - mine.start)
    sends, recvs = message_pairs(mine)
    send_of = dict(zip(recvs.tolist(), sends.tolist()))
    before = _previous_on_rank(mine.rank, start)
    path, via = _walk(mine.kind, start, end, before, send_of)
    ranks = mine.rank[path]
    unbounded = {int(r) for r in ranks if not np.isfinite(clocked.estimate[r])}
    unbounded -= {int(clocked.reference[r]) for r in ranks}
    t0 = start[path[0]]
    return FoldedPath(
        replica,
        iteration,
        job.layout,
        ranks,
        mine.stage[path],
        mine.kind[path],
        mine.microbatch[path],
        start[path] - t0,
        end[path] - t0,
        via,
        tuple(sorted(unbounded)),
        step_s,
    )


def _previous_on_rank(rank: np.ndarray, start: np.ndarray) -> np.ndarray:
    """For each instruction, the one that started just before it on its rank (-1: none)."""
    order = np.lexsort((start, rank))
    prev = np.full(len(rank), -1)
    same = rank[order][1:] == rank[order][:-1]
    prev[order[1:][same]] = order[:-1][same]
    return prev


def _walk(
    kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    before: np.ndarray,
    send_of: dict[int, int],
) -> tuple[np.ndarray, np.ndarray]:
    """Back from the last end: each step's predecessor (see the module docstring)."""
    cur = int(np.argmax(end))
    path, via = [cur], [False]
    seen = {cur}
    while True:
        send = send_of.get(cur) if int(kind[cur]) in _RECEIVES else None
        local = int(before[cur])
        ready = end[local] if local >= 0 else -np.inf
        if send is not None and start[send] >= ready:
            nxt, by_message = send, True
        else:
            nxt, by_message = local, False
        if nxt < 0 or nxt in seen:
            break
        via[-1] = by_message
        path.append(nxt)
        via.append(False)
        seen.add(nxt)
        cur = nxt
    return np.array(path[::-1]), np.array(via[::-1])


__all__ = ["FoldedPath", "folded_path", "slowest_replica"]
