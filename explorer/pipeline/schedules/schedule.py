"""The ``Schedule``: one instruction stream per rank, as a list of steps, stored in columns.

A schedule is data, never a running job: it can be listed, diffed, saved and analysed without
launching anything. Instructions are stored as parallel numpy columns sorted by
``(rank, step)`` with the order inside a step preserved, because the analyses run over
hundreds of thousands of instructions (64 stages x 1,024 micro-batches) and one Python object
per instruction would dominate their cost. :class:`Instruction` objects are made on demand
for listings and tests.

Vocabulary (DESIGN.md): a *stage* is one pipeline partition; a *rank* is a process. Without
interleaving rank == stage; with virtual stages a rank holds several stages
(``stage_to_rank``). A *step* is one row of a rank's stream; steps share one index across
ranks so that a send and its matching receive sit on the same step (as in DeepSpeed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from explorer.errors import InputError, excerpt
from explorer.pipeline.schedules.instructions import COMPUTE_KINDS, Instruction, Kind

#: Each kind by its value (an ``IntEnum`` call per instruction costs more than the rest of it).
_KIND_OF: dict[int, Kind] = {int(k): k for k in Kind}

_INT = np.int32


@dataclass(frozen=True, eq=False)
class Schedule:
    """Per-rank instruction streams in columnar form (see the module docstring).

    Columns (equal length, sorted by rank then step, original order kept within a step):
    ``rank``, ``step``, ``kind``, ``stage``, ``microbatch``, ``buffer``.
    """

    name: str
    num_stages: int
    num_microbatches: int
    stage_to_rank: tuple[int, ...]
    buffers: tuple[int, ...]
    rank: np.ndarray
    step: np.ndarray
    kind: np.ndarray
    stage: np.ndarray
    microbatch: np.ndarray
    buffer: np.ndarray
    num_steps: int
    #: How the schedule was made (generator kind, order, buffer policy, p2p model...).
    params: Mapping[str, object] = field(default_factory=dict)
    #: Optional per-(rank, step) label, e.g. DeepSpeed's current micro-batch id (may be < 0).
    step_labels: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.rank)
        for name in ("step", "kind", "stage", "microbatch", "buffer"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"column {name} has {len(getattr(self, name))} rows, expected {n}")
        if len(self.buffers) != self.num_stages:
            raise ValueError(
                f"buffers has {len(self.buffers)} entries for {self.num_stages} stages"
            )
        if len(self.stage_to_rank) != self.num_stages:
            raise ValueError(
                f"stage_to_rank has {len(self.stage_to_rank)} entries for {self.num_stages} stages"
            )

    # -- shape -----------------------------------------------------------------------------
    @property
    def num_ranks(self) -> int:
        return max(self.stage_to_rank) + 1 if self.stage_to_rank else 0

    @property
    def num_chunks(self) -> int:
        """Stages per rank (virtual stages); 1 without interleaving."""
        return -(-self.num_stages // max(self.num_ranks, 1))

    def __len__(self) -> int:
        return len(self.rank)

    def stages_of_rank(self, rank: int) -> list[int]:
        return [s for s, r in enumerate(self.stage_to_rank) if r == rank]

    # -- objects on demand -----------------------------------------------------------------
    def instruction(self, index: int) -> Instruction:
        return Instruction(
            stage=int(self.stage[index]),
            kind=_KIND_OF[int(self.kind[index])],
            microbatch=int(self.microbatch[index]),
            buffer=int(self.buffer[index]),
        )

    def rank_slice(self, rank: int) -> slice:
        """Index range of ``rank``'s stream in the columns."""
        lo, hi = np.searchsorted(self.rank, [rank, rank + 1])
        return slice(int(lo), int(hi))

    def stream(self, rank: int) -> list[list[Instruction]]:
        """``rank``'s instructions as a list of steps (empty lists for idle steps).

        The rank's slice of each column is read as Python ints in one call (``tolist``), not
        element by element: adapters and lowering ask for every stream of every size."""
        steps: list[list[Instruction]] = [[] for _ in range(self.num_steps)]
        sl = self.rank_slice(rank)
        columns = (self.step, self.stage, self.kind, self.microbatch, self.buffer)
        kinds = _KIND_OF
        for step, stage, kind, mb, buf in zip(*(c[sl].tolist() for c in columns)):
            steps[step].append(Instruction(stage, kinds[kind], mb, buf))
        return steps

    def streams(self) -> list[list[list[Instruction]]]:
        return [self.stream(r) for r in range(self.num_ranks)]

    # -- equality --------------------------------------------------------------------------
    def same_instructions(self, other: "Schedule") -> bool:
        """True when both hold the same streams (names and params may differ)."""
        return (
            self.num_stages == other.num_stages
            and self.num_microbatches == other.num_microbatches
            and self.stage_to_rank == other.stage_to_rank
            and self.buffers == other.buffers
            and self.num_steps == other.num_steps
            and all(
                np.array_equal(getattr(self, c), getattr(other, c))
                for c in ("rank", "step", "kind", "stage", "microbatch", "buffer")
            )
        )

    def replace(self, **changes: object) -> "Schedule":
        values = {f: getattr(self, f) for f in self.__dataclass_fields__}
        values.update(changes)
        return Schedule(**values)


#: The refusal of an order with nothing to compute, in the same words whichever source gave it.
NO_COMPUTE = "the pipeline order holds no compute action (F, B, I or W)"
#: The compute kinds are consecutive codes, so "computes" is one byte comparison per row (np.isin
#: took 10% of a 64 x 1,024 check).
_COMPUTE_LOW, _COMPUTE_HIGH = min(int(k) for k in COMPUTE_KINDS), max(int(k) for k in COMPUTE_KINDS)
assert _COMPUTE_HIGH - _COMPUTE_LOW + 1 == len(COMPUTE_KINDS), "compute kinds must be consecutive"


def require_compute(schedule: Schedule) -> None:
    """Refuse a schedule that computes nothing: a PyTorch CSV of sends only, or a ``--from``
    class whose ``steps()`` yields nothing. There is no pipeline to analyse, and the analyses
    index its first step; every source's schedule passes here before them (see ``check``)."""
    codes = schedule.kind.view(np.uint8)  # below the low code wraps around to large values
    if not (codes - np.uint8(_COMPUTE_LOW) <= np.uint8(_COMPUTE_HIGH - _COMPUTE_LOW)).any():
        raise InputError(
            f"{excerpt(schedule.name)}: {NO_COMPUTE}; its steps must forward (and backward) "
            "micro-batches"
        )


def from_columns(
    *,
    name: str,
    num_stages: int,
    num_microbatches: int,
    stage_to_rank: Sequence[int],
    buffers: Sequence[int],
    rank: np.ndarray,
    step: np.ndarray,
    kind: np.ndarray,
    stage: np.ndarray,
    microbatch: np.ndarray,
    buffer: np.ndarray,
    num_steps: int | None = None,
    params: Mapping[str, object] | None = None,
    step_labels: np.ndarray | None = None,
    presorted: bool = False,
) -> Schedule:
    """Build a :class:`Schedule` from columns given in per-step order; sorts by (rank, step)."""
    # A presorted int8 kind column is already the schedule's own: no round trip through int32.
    kind8 = kind if presorted and isinstance(kind, np.ndarray) and kind.dtype == np.int8 else None
    cols = [
        c if c is kind8 else np.asarray(c, dtype=_INT)
        for c in (rank, step, kind, stage, microbatch, buffer)
    ]
    if not presorted and len(cols[0]):
        order = np.lexsort((np.arange(len(cols[0])), cols[1], cols[0]))
        cols = [c[order] for c in cols]
    steps = int(cols[1].max()) + 1 if len(cols[1]) else 0
    return Schedule(
        name=name,
        num_stages=int(num_stages),
        num_microbatches=int(num_microbatches),
        stage_to_rank=tuple(int(r) for r in stage_to_rank),
        buffers=tuple(int(b) for b in buffers),
        rank=cols[0],
        step=cols[1],
        kind=kind8 if kind8 is not None else cols[2].astype(np.int8),
        stage=cols[3],
        microbatch=cols[4],
        buffer=cols[5],
        num_steps=max(steps, int(num_steps or 0)),
        params=dict(params or {}),
        step_labels=step_labels,
    )


def from_streams(
    streams: Sequence[Sequence[Iterable[Instruction]]],
    *,
    num_microbatches: int | None = None,
    stage_to_rank: Sequence[int] | None = None,
    buffers: Sequence[int] | None = None,
    name: str = "custom",
    params: Mapping[str, object] | None = None,
    step_labels: np.ndarray | None = None,
) -> Schedule:
    """Build a schedule from ``streams[rank][step] -> instructions`` (the readable form).

    Missing facts are inferred: stages and their ranks from the instructions, micro-batches
    from the largest id, buffers per stage from the largest buffer id.
    """
    rows: list[tuple[int, int, int, int, int, int]] = []
    for r, steps in enumerate(streams):
        for t, instrs in enumerate(steps):
            for ins in instrs:
                if not isinstance(ins, Instruction):
                    raise InputError(f"rank {r} step {t}: {ins!r} is not an Instruction")
                rows.append((r, t, int(ins.kind), ins.stage, ins.microbatch, ins.buffer))
    arr = np.array(rows, dtype=_INT).reshape(-1, 6)
    num_steps = max((len(s) for s in streams), default=0)
    stages_seen = sorted(set(arr[:, 3].tolist()))
    if stage_to_rank is None:
        mapping: dict[int, int] = {}
        for r, _, _, s, _, _ in rows:
            if mapping.setdefault(s, r) != r:
                raise InputError(
                    f"stage {s} appears on ranks {mapping[s]} and {r}: give stage_to_rank explicitly"
                )
        num_stages = (max(stages_seen) + 1) if stages_seen else len(streams)
        stage_to_rank = [mapping.get(s, s) for s in range(num_stages)]
    num_stages = len(stage_to_rank)
    if num_microbatches is None:
        num_microbatches = int(arr[:, 4].max()) + 1 if len(arr) else 0
    if buffers is None:
        buffers = [0] * num_stages
        for _, _, _, s, _, b in rows:
            buffers[s] = max(buffers[s], b + 1)
    return from_columns(
        name=name,
        num_stages=num_stages,
        num_microbatches=num_microbatches,
        stage_to_rank=stage_to_rank,
        buffers=buffers,
        rank=arr[:, 0],
        step=arr[:, 1],
        kind=arr[:, 2],
        stage=arr[:, 3],
        microbatch=arr[:, 4],
        buffer=arr[:, 5],
        num_steps=num_steps,
        params=params,
        step_labels=step_labels,
        presorted=True,
    )


__all__ = ["NO_COMPUTE", "Schedule", "from_columns", "from_streams", "require_compute"]
