"""Schedule generators, one module per family, and the registry that validates their input."""

from __future__ import annotations

from typing import Literal, Sequence, Union

import numpy as np

from explorer.cli_options import schedule_size
from explorer.errors import InputError
from explorer.pipeline.schedules.generators.deepspeed import (
    ExchangeOrder,
    deepspeed_buffers,
    deepspeed_inference,
    deepspeed_train,
)
from explorer.pipeline.schedules.generators.dualpipe import dualpipev
from explorer.pipeline.schedules.generators.pipelines import gpipe, interleaved, one_f_one_b
from explorer.pipeline.schedules.generators.zero_bubble import zb_h1
from explorer.pipeline.schedules.schedule import Schedule

BufferSpec = Union[None, str, int, Sequence[int]]

#: The schedule kinds the generators build.
ScheduleKind = Literal[
    "deepspeed-train",
    "deepspeed-inference",
    "gpipe",
    "1f1b",
    "interleaved-1f1b",
    "zb-h1",
    "dualpipev",
]

#: Every schedule kind, with a line for ``--help`` and the notebooks.
KINDS: dict[ScheduleKind, str] = {
    "deepspeed-train": "DeepSpeed TrainSchedule (synchronous 1F1B, blocking P2P); --buffers/--order legacy or fixed",
    "deepspeed-inference": "DeepSpeed InferenceSchedule (forward only, two buffers)",
    "gpipe": "GPipe: all forwards, then all backwards",
    "1f1b": "1F1B: p - s warm-up forwards, then one forward per backward",
    "interleaved-1f1b": "Megatron interleaved 1F1B: --chunks virtual stages per rank",
    "zb-h1": "Zero-bubble H1: backward split into input (I) and weight (W) gradients",
    "dualpipev": "DualPipeV: two stages per rank in a V, forward of one chunk paired with backward of the other",
}


#: DeepSpeed's InferenceSchedule alternates two buffers whatever it is given: any other count,
#: formula or ``minimal`` would be another schedule, checked under its name.
INFERENCE_BUFFERS = "deepspeed-inference always alternates two buffers; drop --buffers"


def generate(
    kind: ScheduleKind,
    stages: int,
    microbatches: int,
    *,
    chunks: int = 1,
    buffers: BufferSpec = None,
    order: ExchangeOrder | None = None,
) -> Schedule:
    """Build a schedule of ``kind``; every bad input raises :class:`InputError` saying what to change.

    ``buffers`` is a count (all stages), one count per stage, ``legacy``/``fixed`` (DeepSpeed's
    formulas, ``deepspeed-train`` only) or ``None`` (the kind's default: DeepSpeed's ``fixed``,
    one buffer per micro-batch elsewhere). ``minimal`` is resolved one layer up, by
    :func:`explorer.pipeline.analysis.build`, because it needs the buffer analysis.
    """
    _check_positive("stages", stages, "the pipeline needs at least one stage")
    _check_positive("micro-batches", microbatches, "a batch needs at least one micro-batch")
    _check_positive("chunks", chunks, "each rank holds at least one stage")
    if kind not in KINDS:
        raise InputError(f"unknown schedule kind {kind!r}: choose one of {', '.join(KINDS)}")
    stages, microbatches, chunks = int(stages), int(microbatches), int(chunks)
    # the CLI's limits hold for the library too: a size past them would fill memory, not fail
    schedule_size(kind, stages, microbatches, chunks)
    if kind == "dualpipev":
        if chunks not in (1, 2):
            raise InputError(
                f"dualpipev always holds 2 stages per rank (a V); drop --chunks {chunks}"
            )
    elif chunks != 1 and kind != "interleaved-1f1b":
        raise InputError(
            f"--chunks {chunks} applies only to interleaved-1f1b; {kind} has one stage per rank (use --chunks 1)"
        )
    if order is not None and kind != "deepspeed-train":
        raise InputError(
            f"--order applies only to deepspeed-train; {kind} orders its exchanges itself (drop --order)"
        )
    if kind == "deepspeed-inference" and buffers not in (None, 2) and buffers != [2] * stages:
        raise InputError(INFERENCE_BUFFERS)
    if isinstance(buffers, str) and buffers in ("legacy", "fixed") and kind != "deepspeed-train":
        raise InputError(
            f"--buffers {buffers} is DeepSpeed's formula and applies only to deepspeed-train; use a number or minimal for {kind}"
        )

    if kind == "deepspeed-train":
        return deepspeed_train(
            stages,
            microbatches,
            buffers=buffers if buffers is not None else "fixed",
            order=order or "fixed",
        )
    if kind == "deepspeed-inference":
        return deepspeed_inference(stages, microbatches)
    counts = (
        None
        if buffers is None or kind == "dualpipev"
        else deepspeed_buffers(buffers, stages * chunks, microbatches)
    )
    if kind == "gpipe":
        return gpipe(stages, microbatches, counts)
    if kind == "1f1b":
        return one_f_one_b(stages, microbatches, counts)
    if kind == "zb-h1":
        return zb_h1(stages, microbatches, counts)
    if kind == "dualpipev":
        if microbatches < 2 * stages:
            raise InputError(
                f"dualpipev with {stages} ranks runs {2 * stages} stages and needs at least that many "
                f"micro-batches (got {microbatches}): use --microbatches {2 * stages} or more"
            )
        counts = None if buffers is None else deepspeed_buffers(buffers, 2 * stages, microbatches)
        return dualpipev(stages, microbatches, counts)
    # interleaved-1f1b
    if microbatches < stages or microbatches % stages:
        raise InputError(
            f"interleaved-1f1b sends micro-batches through the chunks in groups of stages ({stages}), "
            f"so micro-batches ({microbatches}) must be a positive multiple of stages: "
            f"use {_nearest_multiples(stages, microbatches)}"
        )
    return interleaved(stages, microbatches, chunks, counts)


def _nearest_multiples(stages: int, microbatches: int) -> str:
    """The multiples of ``stages`` on either side of ``microbatches``, each named once: below
    ``stages`` both sides are ``stages`` itself, and "use 4 or 4" reads like a typo."""
    below = max(stages, microbatches - microbatches % stages)
    above = (microbatches // stages + 1) * stages
    return str(below) if below == above else f"{below} or {above}"


def _check_positive(name: str, value: object, why: str) -> None:
    # numpy's integers are integers too (a size read from an array); bool and float are not
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name} must be a positive integer ({why}); got {value!r}")


__all__ = [
    "ExchangeOrder",
    "deepspeed_buffers",
    "deepspeed_inference",
    "deepspeed_train",
    "dualpipev",
    "gpipe",
    "interleaved",
    "one_f_one_b",
    "zb_h1",
    "BufferSpec",
    "ScheduleKind",
    "KINDS",
    "generate",
]
