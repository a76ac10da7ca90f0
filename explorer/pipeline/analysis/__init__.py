"""Analyses of schedules: P2P matching, deadlocks, buffer dataflow, timeline and bubble.

Pure python + numpy. Start with :func:`check` (everything at once) or :func:`build`
(a schedule by kind, with the ``minimal`` buffer policy).
"""

from explorer.pipeline.analysis.buffers import (
    buffer_hazards,
    needed_buffers,
    with_buffers,
    with_minimal_buffers,
)
from explorer.pipeline.analysis.check import Report, build, check
from explorer.pipeline.analysis.deadlock import find_deadlock
from explorer.pipeline.analysis.findings import (
    Bubble,
    BufferUse,
    Deadlock,
    Findings,
    Hazard,
    Mismatch,
    Unmatched,
    Waiting,
)
from explorer.pipeline.analysis.p2p import Matching, match
from explorer.pipeline.analysis.timeline import Costs, Timeline, simulate

__all__ = [
    "Bubble",
    "BufferUse",
    "Costs",
    "Deadlock",
    "Findings",
    "Hazard",
    "Matching",
    "Mismatch",
    "Report",
    "Timeline",
    "Unmatched",
    "Waiting",
    "buffer_hazards",
    "build",
    "check",
    "find_deadlock",
    "match",
    "needed_buffers",
    "simulate",
    "with_buffers",
    "with_minimal_buffers",
]
