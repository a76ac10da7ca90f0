"""The plain, per-instruction simulator: the oracle for the fast analyses and their fallback.

A send/receive pair between two stages of the same rank (interleaving with one rank) is a
local hand-off under either model: the send never blocks, the receive waits for the send and
costs nothing.

It walks every rank's stream with a program counter, exactly as an engine would, and is
therefore easy to trust; it costs one Python iteration per instruction. The fast, vectorised
paths in :mod:`.deadlock` and :mod:`.timeline` must agree with it (property tests check
that), and they hand over to it for schedules whose send/receive pairs do not share a step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.pipeline.analysis.p2p_models import P2PModel, execution_order
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule


@dataclass(frozen=True)
class SimulatedRun:
    """What the simulator saw: when each instruction started and ended, and where ranks stuck.

    Named apart from :class:`explorer.pipeline.traces.result.PipelineRunResult`, which records
    a real run of processes; this one never left the analysis.
    """

    start: np.ndarray  # per row; nan where never reached
    end: np.ndarray
    heads: dict[int, int]  # rank -> first row it is stuck at (empty when everything ran)


def run(
    schedule: Schedule, partner: np.ndarray, cost: np.ndarray, p2p_latency: float, model: P2PModel
) -> SimulatedRun:
    """Execute all streams under ``model`` with per-row costs; report where ranks get stuck."""
    order = execution_order(schedule, model)
    rank_of = schedule.rank[order]
    bounds = np.searchsorted(rank_of, np.arange(schedule.num_ranks + 1))
    streams = [order[bounds[r] : bounds[r + 1]].tolist() for r in range(schedule.num_ranks)]
    pos = [0] * schedule.num_ranks
    clock = [0.0] * schedule.num_ranks
    n = len(schedule)
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    kind = schedule.kind.tolist()
    rank = schedule.rank.tolist()
    partner_l = partner.tolist()
    cost_l = cost.tolist()
    sends = (Kind.SEND_ACTIVATION, Kind.SEND_GRAD)
    recvs = (Kind.RECV_ACTIVATION, Kind.RECV_GRAD)

    def head(r: int) -> int:
        return streams[r][pos[r]] if pos[r] < len(streams[r]) else -1

    active = True
    while active:
        active = False
        for r in range(schedule.num_ranks):
            while pos[r] < len(streams[r]):
                i = streams[r][pos[r]]
                k = kind[i]
                if k in sends or k in recvs:
                    q = partner_l[i]
                    if q < 0:
                        break
                    rq = rank[q]
                    if model == "blocking" and rq != r:
                        if head(rq) != q:
                            break
                        s = max(clock[r], clock[rq])
                        start[i] = start[q] = s
                        end[i] = clock[r] = s + p2p_latency + cost_l[i]
                        end[q] = clock[rq] = s + p2p_latency + cost_l[q]
                        pos[rq] += 1
                    elif k in sends:
                        start[i] = clock[r]
                        end[i] = clock[r] = clock[r] + cost_l[i]
                    else:
                        if np.isnan(end[q]):
                            break
                        # The wait before the data arrives is idle time, not work: the bar starts
                        # at the arrival. A hand-off between two stages of one rank has no latency.
                        arrival = end[q] + (p2p_latency if rq != r else 0.0)
                        start[i] = max(clock[r], arrival)
                        end[i] = clock[r] = start[i] + cost_l[i]
                else:
                    start[i] = clock[r]
                    end[i] = clock[r] = clock[r] + cost_l[i]
                pos[r] += 1
                active = True
    heads = {r: head(r) for r in range(schedule.num_ranks) if head(r) >= 0}
    return SimulatedRun(start=start, end=end, heads=heads)


__all__ = ["SimulatedRun", "run"]
