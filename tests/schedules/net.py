"""The schedules the property net proves: every built-in one that is meant to be correct, and
every one known to be wrong, each with the P2P models it is asked under.

A correct schedule is asked under its own model and under every other model that applies to it:
DeepSpeed's schedules and GPipe hold under blocking and batched P2P; the PyTorch-style schedules
(1F1B, zero-bubble, interleaved, DualPipeV) post their exchanges in batches, and under DeepSpeed's
blocking sends they deadlock, which is the explorer's own warning (a wrong schedule below, not a
model that applies). Each is checked with lazily created communicators: a check with them finds
everything the eager one finds and more, so one sweep proves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.buffers import with_minimal_buffers
from explorer.pipeline.schedules.adapters import from_torch_pipelining
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.schedules.torch_csv import (
    order_from_schedule,
    read_torch_csv,
    schedule_from_order,
    write_torch_csv,
)

Make = Callable[[int, int], Schedule]
BOTH = ("blocking", "batched")
BATCHED = ("batched",)
#: The net's range: at least 2-12 stages x 1-32 micro-batches.
RANGE = "2-12:1-32"
#: The CSV round trip with its exchanges written out costs a Python object per action: a smaller range.
CSV_COMMS_RANGE = "2-8:1-16"


@dataclass(frozen=True)
class Correct:
    """A schedule meant to be correct at every size it applies to, and the models asked."""

    name: str
    make: Make
    models: tuple[str, ...]
    sizes: str = RANGE


@dataclass(frozen=True)
class Wrong:
    """A schedule known to be wrong: its smallest failing size in :data:`RANGE` and what fails."""

    name: str
    make: Make
    model: str
    smallest: tuple[int, int]
    finding: str  # the SizeSweep.counts() key that is not zero at the smallest size
    words: str  # in the smallest failing size's first finding


def _generator(kind: str, **options) -> Make:
    return lambda p, m: build(kind, p, m, **options)  # type: ignore[arg-type]


def _torch_class(name: str, chunks: int) -> Make:
    def make(p: int, m: int) -> Schedule:
        from explorer.pipeline.runtime.pipelining_orders import pipeline_order

        order = pipeline_order(name, p, m, chunks)
        return with_minimal_buffers(
            from_torch_pipelining(order, num_microbatches=m, num_stages=p * chunks)
        )

    return make


def _csv_round_trip(make: Make, comms: bool) -> Make:
    """``make``'s schedule written as PyTorch's CSV and read back."""
    return lambda p, m: with_minimal_buffers(
        schedule_from_order(
            read_torch_csv(write_torch_csv(order_from_schedule(make(p, m), comms=comms)))
        )
    )


def _edited(make: Make, edit: Callable[[dict], None], comms: bool = False) -> Make:
    """``make``'s schedule as a PyTorch order, edited in place by ``edit``, lowered again."""

    def made(p: int, m: int) -> Schedule:
        order = order_from_schedule(make(p, m), comms=comms)
        edit(order)
        return with_minimal_buffers(schedule_from_order(order))

    return made


def drop_last_weight_pass(order: dict) -> None:
    """Rank 0 loses its last ``W``: one weight gradient never reaches the optimizer step."""
    last = max(i for i, a in enumerate(order[0]) if str(a).startswith("0W"))
    del order[0][last]


def run_last_weight_pass_twice(order: dict) -> None:
    """Rank 0 runs its last ``W`` again (a ``W`` exchanges nothing): a gradient counted twice."""
    order[0].append(next(a for a in reversed(order[0]) if str(a).startswith("0W")))


GENERATED: list[Correct] = [
    *(
        Correct(
            f"deepspeed-train buffers={b} order={o}",
            _generator("deepspeed-train", buffers=b, order=o),
            BOTH,
        )
        for b, o in [
            ("legacy", "legacy"),
            ("legacy", "fixed"),
            ("fixed", "fixed"),
            ("minimal", "legacy"),
            ("minimal", "fixed"),
            (None, "fixed"),
        ]
    ),
    Correct("deepspeed-inference", _generator("deepspeed-inference"), BOTH),
    Correct("gpipe", _generator("gpipe"), BOTH),
    Correct("1f1b", _generator("1f1b"), BATCHED),
    Correct("zb-h1", _generator("zb-h1"), BATCHED),
    Correct("dualpipev", _generator("dualpipev"), BATCHED),
    *(
        Correct(f"interleaved-1f1b chunks={c}", _generator("interleaved-1f1b", chunks=c), BATCHED)
        for c in (2, 3, 4)
    ),
]

TORCH_CLASSES: list[Correct] = [
    Correct(f"PyTorch {name}", _torch_class(name, chunks), BATCHED)
    for name, chunks in [
        ("ScheduleGPipe", 1),
        ("ScheduleInterleaved1F1B", 2),
        ("ScheduleLoopedBFS", 2),
        ("ScheduleInterleavedZeroBubble", 2),
        ("ScheduleZBVZeroBubble", 2),
        ("ScheduleDualPipeV", 2),
    ]
]


def _csv_distinct(c: Correct, comms: bool) -> bool:
    """Whether ``c``'s CSV says something another entry's does not. PyTorch's CSV carries no
    buffers, so DeepSpeed's buffer options write one file; without exchanges the exchange order
    is not written either."""
    if not c.name.startswith("deepspeed-train"):
        return True
    one_per_order = c.name.endswith(("buffers=legacy order=legacy", "buffers=fixed order=fixed"))
    return one_per_order and (comms or c.name.endswith("order=fixed"))


CSV_ROUND_TRIPS: list[Correct] = [
    Correct(
        f"{c.name} through PyTorch's CSV{' with exchanges' if comms else ''}",
        _csv_round_trip(c.make, comms),
        BATCHED,
        CSV_COMMS_RANGE if comms else RANGE,
    )
    for c in GENERATED
    for comms in (False, True)
    if _csv_distinct(c, comms)
]

CORRECT: list[Correct] = GENERATED + TORCH_CLASSES + CSV_ROUND_TRIPS

WRONG: list[Wrong] = [
    Wrong(
        "DeepSpeed's TrainSchedule with one buffer fewer and the old exchange order (the seed)",
        _generator("deepspeed-train", buffers="fixed", order="legacy"),
        "blocking",
        (3, 3),
        "hazards",
        "SendGrad(buffer_id=0)",
    ),
    *(
        Wrong(
            f"{kind} under DeepSpeed's blocking sends",
            _generator(kind, **options),
            "blocking",
            smallest,
            "deadlocks",
            "deadlock under blocking P2P",
        )
        for kind, options, smallest in [
            ("1f1b", {}, (2, 2)),
            ("zb-h1", {}, (2, 2)),
            ("interleaved-1f1b", {"chunks": 2}, (2, 2)),
            ("dualpipev", {}, (2, 4)),
        ]
    ),
    Wrong(
        "PyTorch 2.9's Schedule1F1B pipeline_order (its micro-batch numbers run one ahead on later ranks)",
        _torch_class("Schedule1F1B", 1),
        "batched",
        (2, 2),
        "mismatches",
        "expects micro-batch",
    ),
    Wrong(
        "zb-h1 with rank 0's last weight pass dropped",
        _edited(_generator("zb-h1"), drop_last_weight_pass),
        "batched",
        (2, 1),
        "gradients",
        "reaches the optimizer step never",
    ),
    Wrong(
        "zb-h1 with rank 0's last weight pass run twice",
        _edited(_generator("zb-h1"), run_last_weight_pass_twice),
        "batched",
        (2, 1),
        "gradients",
        "reaches the optimizer step 2 times",
    ),
]

__all__ = [
    "BATCHED",
    "BOTH",
    "CORRECT",
    "CSV_COMMS_RANGE",
    "Correct",
    "GENERATED",
    "RANGE",
    "WRONG",
    "Wrong",
]
