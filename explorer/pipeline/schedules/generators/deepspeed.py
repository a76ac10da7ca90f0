"""DeepSpeed's pipeline schedules, reimplemented faithfully as columnar data.

``TrainSchedule`` (``deepspeed/runtime/pipe/schedule.py``) alternates forward and backward
steps by the parity of step and stage and sends each micro-batch one step after computing
it. Two of its choices changed in DeepSpeed 0.8.3 (issue #2800, PR #2862) and both are
selectable here, independently, because the bug discussed in that issue
(https://github.com/deepspeedai/DeepSpeed/issues/2800) lives exactly in their combination:

- buffers: ``legacy`` = ``max(2, min(stages - stage + 1, micro_batches))``;
  ``fixed`` = the same without ``+1``; or an explicit count (one for all stages, or one per
  stage).
- order: ``legacy`` = forward step ``RecvActivation(curr)`` then ``SendGrad(prev)``, backward
  step ``SendActivation(prev)`` then ``RecvGrad(curr)``; ``fixed`` swaps both pairs.

The generator is vectorised over (stage, step) so that 64 stages x 1,024 micro-batches build
in milliseconds.
"""

from __future__ import annotations

from typing import Literal, Sequence, Union, get_args

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule, from_columns

#: DeepSpeed's send/receive order inside a step: before 0.8.3 (``legacy``) and since (``fixed``).
ExchangeOrder = Literal["legacy", "fixed"]
#: DeepSpeed's ``num_pipe_buffers`` formula: before 0.8.3 (``legacy``) and since (``fixed``).
BufferFormula = Literal["legacy", "fixed"]
ORDERS: tuple[ExchangeOrder, ...] = get_args(ExchangeOrder)
BUFFER_FORMULAS: tuple[BufferFormula, ...] = get_args(BufferFormula)
BufferSpec = Union[BufferFormula, int, Sequence[int]]


def deepspeed_buffers(policy: BufferSpec | str, stages: int, microbatches: int) -> list[int]:
    """Buffer count per stage for a DeepSpeed ``TrainSchedule`` buffer policy (any other name is refused here)."""
    if isinstance(policy, str):
        if policy not in BUFFER_FORMULAS:
            raise InputError(
                f"unknown buffer policy {policy!r}: use legacy, fixed, minimal or a number"
            )
        extra = 1 if policy == "legacy" else 0
        return [max(2, min(stages - s + extra, microbatches)) for s in range(stages)]
    if isinstance(policy, (int, np.integer)) and not isinstance(policy, bool):
        counts = [int(policy)] * stages
    elif isinstance(policy, (list, tuple, np.ndarray)):
        counts = [_whole(c) for c in policy]
        if len(counts) != stages:
            raise InputError(
                f"got {len(counts)} buffer counts for {stages} stages: give one per stage or a single number"
            )
    else:  # a float, nan, a bool...
        raise InputError(
            f"buffers is a whole number, one per stage, or a policy name; got {policy!r}"
        )
    if min(counts) < 1:
        raise InputError(
            f"buffer counts must be at least 1 (got {counts}): every stage needs a buffer to receive into"
        )
    return counts


def _whole(count: object) -> int:
    """A buffer count as an int; 4.5, nan or "4" is refused (``int()`` would cut 4.5 to 4)."""
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
        raise InputError(f"buffer counts are whole numbers; got {count!r}")
    return int(count)


def _step_to_microbatch(
    steps: np.ndarray, stage: int, stages: int
) -> tuple[np.ndarray, np.ndarray]:
    """DeepSpeed's ``_step_to_micro_batch`` for one stage, over all steps at once."""
    even_step = steps % 2 == 0
    even_stage = stage % 2 == 0
    is_forward = even_step == even_stage
    base_even = steps // 2
    base_odd = (steps - 1) // 2
    if even_stage:
        fwd = base_even - stage // 2
        bwd = base_odd - stages + 1 + stage // 2
        mb = np.where(even_step, fwd, bwd)
    else:
        fwd = base_odd - stage // 2
        bwd = base_even - stages + (stage + 1) // 2
        mb = np.where(even_step, bwd, fwd)
    return mb.astype(np.int64), is_forward


def deepspeed_train(
    stages: int,
    microbatches: int,
    buffers: BufferSpec | str = "fixed",
    order: ExchangeOrder = "fixed",
) -> Schedule:
    """DeepSpeed ``TrainSchedule`` for every stage, with selectable buffers and send/recv order."""
    if order not in ORDERS:
        raise InputError(
            f"unknown order {order!r}: use legacy (DeepSpeed <= 0.8.2) or fixed (today)"
        )
    counts = deepspeed_buffers(buffers, stages, microbatches)
    p, m = stages, microbatches
    total = 2 * (m + p - 1)
    t = np.arange(total)
    nslots = 7  # two exchanges, load, compute, three end-of-batch instructions
    kind = np.zeros((p, total, nslots), dtype=np.int64)
    mbs = np.full((p, total, nslots), -1, dtype=np.int64)
    mask = np.zeros((p, total, nslots), dtype=bool)
    labels = np.zeros((p, total), dtype=np.int64)
    for s in range(p):
        curr, fwd = _step_to_microbatch(t, s, p)
        prev = np.concatenate(([-1], curr[:-1]))
        vc = (curr >= 0) & (curr < m)
        vp = (prev >= 0) & (prev < m)
        has_prev_stage, has_next_stage = s > 0, s < p - 1
        # (kind, micro-batch, condition) for the forward-step and backward-step exchanges.
        recv_act = (Kind.RECV_ACTIVATION, curr, fwd & vc & has_prev_stage)
        send_grad = (Kind.SEND_GRAD, prev, fwd & vp & has_prev_stage)
        send_act = (Kind.SEND_ACTIVATION, prev, ~fwd & vp & has_next_stage)
        recv_grad = (Kind.RECV_GRAD, curr, ~fwd & vc & has_next_stage)
        if order == "legacy":
            first = (recv_act, send_act)
            second = (send_grad, recv_grad)
        else:
            first = (send_grad, recv_grad)
            second = (recv_act, send_act)
        for slot, (on_fwd, on_bwd) in enumerate((first, second)):
            kind[s, :, slot] = np.where(fwd, int(on_fwd[0]), int(on_bwd[0]))
            mbs[s, :, slot] = np.where(fwd, on_fwd[1], on_bwd[1])
            mask[s, :, slot] = on_fwd[2] | on_bwd[2]
        kind[s, :, 2] = Kind.LOAD
        mbs[s, :, 2] = curr
        mask[s, :, 2] = fwd & vc & (s == 0 or s == p - 1)
        kind[s, :, 3] = np.where(fwd, int(Kind.FORWARD), int(Kind.BACKWARD))
        mbs[s, :, 3] = curr
        mask[s, :, 3] = vc
        for slot, k in zip(
            (4, 5, 6), (Kind.REDUCE_TIED_GRADS, Kind.REDUCE_GRADS, Kind.OPTIMIZER_STEP)
        ):
            kind[s, -1, slot] = k
            mask[s, -1, slot] = True
        labels[s] = curr
    return _from_grid(
        "deepspeed-train",
        p,
        m,
        counts,
        kind,
        mbs,
        mask,
        labels,
        params={
            "kind": "deepspeed-train",
            "buffers": buffers if isinstance(buffers, str) else counts,
            "order": order,
            "p2p": "blocking",
        },
    )


def deepspeed_inference(stages: int, microbatches: int) -> Schedule:
    """DeepSpeed ``InferenceSchedule``: forward only, two buffers, parity-ordered exchanges."""
    p, m = stages, microbatches
    total = m + p - 1
    t = np.arange(total)
    kind = np.zeros((p, total, 4), dtype=np.int64)
    mbs = np.full((p, total, 4), -1, dtype=np.int64)
    mask = np.zeros((p, total, 4), dtype=bool)
    bufs = np.full((p, total, 4), -1, dtype=np.int64)
    labels = np.zeros((p, total), dtype=np.int64)
    for s in range(p):
        mb = t - s
        even = s % 2 == 0
        recv_buf = (t + (0 if even else 1)) % 2
        send_buf = (t + (1 if even else 0)) % 2
        vc = (mb >= 0) & (mb < m)
        vp = (mb - 1 >= 0) & (mb - 1 < m)
        kind[s, :, 0], mbs[s, :, 0], bufs[s, :, 0] = Kind.LOAD, mb, recv_buf
        mask[s, :, 0] = vc & (s == 0 or s == p - 1)
        send = (Kind.SEND_ACTIVATION, mb - 1, send_buf, vp & (s < p - 1))
        recv = (Kind.RECV_ACTIVATION, mb, recv_buf, vc & (s > 0))
        for slot, (k, mbv, buf, cond) in zip((1, 2), (send, recv) if even else (recv, send)):
            kind[s, :, slot], mbs[s, :, slot], bufs[s, :, slot], mask[s, :, slot] = (
                k,
                mbv,
                buf,
                cond,
            )
        kind[s, :, 3], mbs[s, :, 3], bufs[s, :, 3], mask[s, :, 3] = Kind.FORWARD, mb, recv_buf, vc
        labels[s] = mb
    return _from_grid(
        "deepspeed-inference",
        p,
        m,
        [2] * p,
        kind,
        mbs,
        mask,
        labels,
        params={"kind": "deepspeed-inference", "p2p": "blocking"},
        explicit_buffers=bufs,
    )


def _from_grid(
    name: str,
    p: int,
    m: int,
    counts: Sequence[int],
    kind: np.ndarray,
    mbs: np.ndarray,
    mask: np.ndarray,
    labels: np.ndarray,
    params: dict,
    explicit_buffers: np.ndarray | None = None,
) -> Schedule:
    """Flatten a (stage, step, slot) grid into a presorted columnar schedule."""
    s_idx, t_idx, slot_idx = np.nonzero(mask)
    k = kind[s_idx, t_idx, slot_idx]
    mb = mbs[s_idx, t_idx, slot_idx]
    if explicit_buffers is not None:
        buf = explicit_buffers[s_idx, t_idx, slot_idx]
    else:
        buf = np.where(mb >= 0, mb % np.asarray(counts)[s_idx], -1)
    no_mb = (k == Kind.REDUCE_GRADS) | (k == Kind.REDUCE_TIED_GRADS) | (k == Kind.OPTIMIZER_STEP)
    mb = np.where(no_mb, -1, mb)
    buf = np.where(no_mb, -1, buf)
    return from_columns(
        name=name,
        num_stages=p,
        num_microbatches=m,
        stage_to_rank=range(p),
        buffers=counts,
        rank=s_idx,
        step=t_idx,
        kind=k,
        stage=s_idx,
        microbatch=mb,
        buffer=buf,
        num_steps=kind.shape[1],
        params=params,
        step_labels=labels,
        presorted=True,
    )


__all__ = [
    "ExchangeOrder",
    "BufferFormula",
    "ORDERS",
    "BUFFER_FORMULAS",
    "BufferSpec",
    "deepspeed_buffers",
    "deepspeed_train",
    "deepspeed_inference",
]
