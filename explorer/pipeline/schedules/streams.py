"""A rank's stream as text lines, in the seed's style: the words a listing and a fix's diff share.

Schedules with DeepSpeed step labels print exactly like the seed's ``pprint`` of
``list(schedule)`` with the current micro-batch first
(``[2, RecvActivation(buffer_id=0), SendGrad(buffer_id=0), ForwardPass(buffer_id=0)]``);
others print ``step 6: 2RA2b0 2SG0b0 2F2b0``. Findings are not marked here (that needs the
analysis): :mod:`explorer.pipeline.printout.listing` adds them to these lines.
"""

from __future__ import annotations

from explorer.pipeline.schedules.schedule import Schedule


def stream_header(s: Schedule, rank: int) -> str:
    """``# name: stage 2 of 4, 8 micro-batches, 2 buffers`` for the rank's stages."""
    stages = s.stages_of_rank(rank)
    who = (
        f"stage {stages[0]}"
        if len(stages) == 1
        else f"rank {rank} (stages {', '.join(map(str, stages))})"
    )
    bufs = ", ".join(str(s.buffers[st]) for st in stages)
    extras = "".join(f", {k} {v}" for k, v in s.params.items() if k in ("order", "chunks"))
    return f"# {s.name}: {who} of {s.num_stages}, {s.num_microbatches} micro-batches, {bufs} buffers{extras}"


def stream_lines(s: Schedule, rank: int) -> list[str]:
    """One line per step of the rank's stream, without a header or marks."""
    labels = s.step_labels
    lines = []
    for t, instrs in enumerate(s.stream(rank)):
        if labels is not None:
            lines.append(
                "["
                + ", ".join([str(int(labels[rank][t]))] + [i.deepspeed_repr() for i in instrs])
                + "]"
            )
        else:
            lines.append(f"step {t}: " + " ".join(str(i) for i in instrs))
    return lines


__all__ = ["stream_header", "stream_lines"]
