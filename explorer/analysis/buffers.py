"""Buffer dataflow: which micro-batch each buffer slot holds when each instruction reads it.

DeepSpeed's engine keeps, per stage, ``inputs[b]``, ``outputs[b]`` and ``labels[b]`` for each
buffer ``b`` and one ``grad_layer`` for the received gradient. The model here follows its
semantics exactly, because the seed's bug lives in them:

- ``LoadMicroBatch`` writes ``inputs[b]`` on the first stage and ``labels[b]`` on the last;
  ``RecvActivation`` writes ``inputs[b]`` (a *new* tensor: any ``.grad`` on the old one is gone);
- ``ForwardPass`` reads ``inputs[b]`` (and ``labels[b]`` on the last stage), writes ``outputs[b]``;
- ``SendActivation`` reads ``outputs[b]``; ``RecvGrad`` writes ``grad_layer``;
- ``BackwardPass`` / ``BackwardInput`` read ``outputs[b]`` and ``grad_layer`` and leave the
  input gradient on the tensor that was ``inputs[b]`` at forward time - which still *is*
  ``inputs[b]`` only if nothing overwrote the slot since;
- ``SendGrad`` reads ``inputs[b].grad``; ``BackwardWeight`` reads ``outputs[b]``.

Each read is resolved to the last write of the same slot before it (a forward fill over the
events sorted by slot), so hundreds of thousands of instructions take a few sorts. A read
that finds another micro-batch than the instruction's own is a :class:`Hazard`, reported with
the instruction that overwrote the slot.
"""

from __future__ import annotations

import numpy as np

from explorer.analysis.findings import Hazard
from explorer.analysis.refs import ref
from explorer.schedules.instructions import Kind
from explorer.schedules.schedule import Schedule

SLOTS = ("input", "output", "labels", "input-grad", "grad-layer")
_INPUT, _OUTPUT, _LABELS, _GRAD, _GRAD_LAYER = range(5)
_NONE = -1


def _events(schedule: Schedule):
    """Reads and writes as columns: (row, sub-order, slot kind, is_write)."""
    k = schedule.kind.astype(np.int64)
    st = schedule.stage.astype(np.int64)
    last = schedule.num_stages - 1
    rows, sub, slot, write = [], [], [], []

    def add(mask, order, slot_kind, is_write):
        r = np.nonzero(mask)[0]
        rows.append(r)
        sub.append(np.full(len(r), order))
        slot.append(np.full(len(r), slot_kind))
        write.append(np.full(len(r), is_write))

    load = k == Kind.LOAD
    add(load & (st == 0), 1, _INPUT, True)
    add(load & (st == last), 1, _LABELS, True)
    add(k == Kind.RECV_ACTIVATION, 1, _INPUT, True)
    fwd = k == Kind.FORWARD
    add(fwd & (st > 0), 0, _INPUT, False)
    add(fwd & (st == 0), 0, _INPUT, False)
    add(fwd & (st == last), 0, _LABELS, False)
    add(fwd, 1, _OUTPUT, True)
    add(k == Kind.SEND_ACTIVATION, 0, _OUTPUT, False)
    add(k == Kind.RECV_GRAD, 1, _GRAD_LAYER, True)
    back = (k == Kind.BACKWARD) | (k == Kind.BACKWARD_INPUT)
    add(back, 0, _OUTPUT, False)
    add(back & (st < last), 0, _GRAD_LAYER, False)
    add(k == Kind.SEND_GRAD, 0, _GRAD, False)
    add(k == Kind.BACKWARD_WEIGHT, 0, _OUTPUT, False)
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)  # noqa: E731
    return cat(rows), cat(sub), cat(slot), cat(write).astype(bool)


def _resolve(key: np.ndarray, pos: np.ndarray, is_write: np.ndarray) -> np.ndarray:
    """For each event, the index (into the arrays) of the last write with the same key before it; -1 if none."""
    order = np.lexsort((pos, key))
    k_sorted = key[order]
    w_sorted = is_write[order]
    idx = np.where(w_sorted, np.arange(len(order)), -1)
    filled = np.maximum.accumulate(idx) if len(idx) else idx
    group_start = np.r_[0, np.nonzero(np.diff(k_sorted))[0] + 1] if len(order) else np.zeros(0, dtype=np.int64)
    starts = np.repeat(group_start, np.diff(np.r_[group_start, len(order)])) if len(order) else group_start
    # A read at the same position as a write (none in this model) would see it; writes see themselves.
    prev = np.where(w_sorted, np.r_[-1, filled[:-1]] if len(filled) else filled, filled)
    prev = np.where(prev >= starts, prev, -1)
    out = np.full(len(order), -1, dtype=np.int64)
    out[order] = np.where(prev >= 0, order[np.maximum(prev, 0)], -1)
    return out


def buffer_hazards(schedule: Schedule) -> list[Hazard]:
    """Every read that finds the wrong micro-batch (or nothing), with the overwriting instruction."""
    rows, sub, slot, is_write = _events(schedule)
    st = schedule.stage.astype(np.int64)[rows]
    buf = np.where(slot == _GRAD_LAYER, 0, schedule.buffer.astype(np.int64)[rows])
    nbuf = int(max(schedule.buffers + (1,))) + 1
    mb = schedule.microbatch.astype(np.int64)[rows]
    pos = rows * 4 + sub

    # Input-gradient state: a write to inputs[b] leaves a tensor without .grad; a backward
    # puts .grad on the tensor that held its micro-batch's input. Resolve inputs first.
    base_key = (st * 5 + slot) * nbuf + buf
    input_key = (st * 5 + _INPUT) * nbuf + buf
    back_mask = np.isin(schedule.kind[rows], (Kind.BACKWARD, Kind.BACKWARD_INPUT)) & (slot == _OUTPUT)
    input_writes = is_write & (slot == _INPUT)
    # Pseudo-events: each backward reads inputs[b] then writes input-grad; each input write also writes input-grad.
    g_rows = np.r_[rows[back_mask], rows[input_writes]]
    g_sub = np.r_[np.full(back_mask.sum(), 2), sub[input_writes]]
    g_mb = np.r_[mb[back_mask], mb[input_writes]]
    g_from_backward = np.r_[np.ones(back_mask.sum(), bool), np.zeros(input_writes.sum(), bool)]
    g_buf = np.r_[buf[back_mask], buf[input_writes]]
    g_st = np.r_[st[back_mask], st[input_writes]]

    # what inputs[b] holds at each backward
    probe_key = np.r_[input_key[input_writes], (g_st[g_from_backward] * 5 + _INPUT) * nbuf + g_buf[g_from_backward]]
    probe_pos = np.r_[pos[input_writes], g_rows[g_from_backward] * 4 + 1]
    probe_w = np.r_[np.ones(input_writes.sum(), bool), np.zeros(g_from_backward.sum(), bool)]
    probe_mb = np.r_[mb[input_writes], np.full(g_from_backward.sum(), _NONE)]
    last_w = _resolve(probe_key, probe_pos, probe_w)[input_writes.sum():]
    held = np.where(last_w >= 0, probe_mb[np.maximum(last_w, 0)], _NONE)
    probe_row = np.r_[rows[input_writes], g_rows[g_from_backward]]
    held_writer = np.where(last_w >= 0, probe_row[np.maximum(last_w, 0)], -1)
    # grad value: micro-batch whose gradient the input tensor carries (or -2 - held mb if no grad)
    g_val = g_mb.copy()
    no_grad_back = held != g_mb[g_from_backward]
    gv_back = np.where(no_grad_back, -2 - held, g_mb[g_from_backward])
    g_val[g_from_backward] = gv_back
    g_val[~g_from_backward] = -2 - g_mb[~g_from_backward]
    # Who to blame when the gradient is missing: the write that replaced the input tensor.
    g_origin = g_rows.copy()
    g_origin[g_from_backward] = np.where(no_grad_back & (held_writer >= 0), held_writer, g_rows[g_from_backward])

    grad_reads = slot == _GRAD
    all_key = np.r_[base_key[~grad_reads], (g_st * 5 + _GRAD) * nbuf + g_buf, base_key[grad_reads]]
    all_pos = np.r_[pos[~grad_reads], g_rows * 4 + g_sub, pos[grad_reads]]
    all_w = np.r_[is_write[~grad_reads], np.ones(len(g_rows), bool), np.zeros(grad_reads.sum(), bool)]
    all_val = np.r_[mb[~grad_reads], g_val, np.full(grad_reads.sum(), _NONE)]
    all_row = np.r_[rows[~grad_reads], g_rows, rows[grad_reads]]
    all_origin = np.r_[rows[~grad_reads], g_origin, rows[grad_reads]]
    all_slot = np.r_[slot[~grad_reads], np.full(len(g_rows), _GRAD), slot[grad_reads]]
    all_mb = np.r_[mb[~grad_reads], g_mb, mb[grad_reads]]
    src = _resolve(all_key, all_pos, all_w)
    reads = np.nonzero(~all_w)[0]
    found = np.where(src[reads] >= 0, all_val[np.maximum(src[reads], 0)], _NONE)
    expected = all_mb[reads]
    bad = reads[found != expected]
    hazards = []
    for e in bad[np.argsort(all_row[bad], kind="stable")]:
        hazards.append(_hazard(schedule, int(all_row[e]), int(all_slot[e]), int(all_mb[e]),
                               src=int(src[e]), src_row=all_origin, src_val=all_val, src_slot=all_slot))
    return hazards


def _hazard(schedule, row, slot, expected, *, src, src_row, src_val, src_slot) -> Hazard:
    at = ref(schedule, row)
    buf = int(schedule.buffer[row])
    where = "grad_layer" if slot == _GRAD_LAYER else f"{'inputs' if slot in (_INPUT, _GRAD) else SLOTS[slot] + 's'}[{buf}]"
    if src < 0:
        return Hazard(at=at, buffer=buf, slot=SLOTS[slot], expected_microbatch=expected, found_microbatch=None,
                      overwritten_by=None,
                      cause=f"stage {at.stage} step {at.step}: {at.name} reads {where} for micro-batch {expected}, but nothing was written there before")
    writer = ref(schedule, int(src_row[src]))
    val = int(src_val[src])
    if slot == _GRAD:
        holder = -2 - val if val < -1 else val
        found = holder
        if val >= 0:
            what = f"holds micro-batch {val}'s gradient"
        elif holder < 0:
            found = None
            what = "holds no received input at all"
        else:
            what = f"holds micro-batch {holder}'s input without a gradient"
        cause = (f"stage {at.stage} step {at.step}: {at.name} must send micro-batch {expected}'s input gradient, "
                 f"but {where} {what}: {writer.name} at step {writer.step} replaced the tensor that carried it")
    else:
        found = val
        cause = (f"stage {at.stage} step {at.step}: {at.name} expects micro-batch {expected} in {where}, "
                 f"but it holds micro-batch {val}, written by {writer.name} at step {writer.step}")
    return Hazard(at=at, buffer=buf, slot=SLOTS[slot], expected_microbatch=expected, found_microbatch=found,
                  overwritten_by=writer, cause=cause)


def needed_buffers(schedule: Schedule) -> list[int]:
    """Per stage, the peak number of micro-batches whose buffers are live at once.

    A micro-batch occupies a buffer on a stage from its first write there (load, receive or
    forward) to its last read (send, backward or weight gradient), in stream order. This is
    the fewest buffers any id assignment can use without overwriting live data.
    """
    rows, sub, slot, is_write = _events(schedule)
    keep = slot != _GRAD_LAYER
    rows, slot = rows[keep], slot[keep]
    p = schedule.num_stages
    st = schedule.stage.astype(np.int64)[rows]
    mb = schedule.microbatch.astype(np.int64)[rows]
    m = max(schedule.num_microbatches, int(mb.max()) + 1 if len(mb) else 1, 1)
    ok = mb >= 0
    key = st[ok] * m + mb[ok]
    r = rows[ok]
    first = np.full(p * m, np.iinfo(np.int64).max)
    lastr = np.full(p * m, -1)
    np.minimum.at(first, key, r)
    np.maximum.at(lastr, key, r)
    live = lastr >= 0
    keys = np.nonzero(live)[0]
    stage_of = keys // m
    # +1 at the first row, -1 just after the last row; sweep per stage in row order.
    ev_stage = np.r_[stage_of, stage_of]
    ev_pos = np.r_[first[keys] * 2 + 1, lastr[keys] * 2 + 2]
    ev_delta = np.r_[np.ones(len(keys), np.int64), -np.ones(len(keys), np.int64)]
    order = np.lexsort((ev_pos, ev_stage))
    ev_stage, ev_delta = ev_stage[order], ev_delta[order]
    running = np.cumsum(ev_delta)
    starts = np.r_[0, np.nonzero(np.diff(ev_stage))[0] + 1]
    offset = np.r_[0, running[:-1]][starts] if len(running) else np.zeros(0)
    needed = [0] * p
    for i, s0 in enumerate(starts):
        s1 = starts[i + 1] if i + 1 < len(starts) else len(running)
        needed[int(ev_stage[s0])] = int((running[s0:s1] - offset[i]).max())
    return needed


def with_buffers(schedule: Schedule, counts: list[int]) -> Schedule:
    """The same schedule with ``counts[stage]`` buffers, ids reassigned as ``microbatch % count``."""
    c = np.asarray(counts, dtype=np.int64)
    mb = schedule.microbatch.astype(np.int64)
    buf = np.where((schedule.buffer >= 0) & (mb >= 0), mb % c[schedule.stage], schedule.buffer)
    params = dict(schedule.params)
    return schedule.replace(buffer=buf.astype(np.int32), buffers=tuple(int(x) for x in counts), params=params)


def with_minimal_buffers(schedule: Schedule) -> Schedule:
    """Reassign buffers so each stage allocates exactly what it needs (see :func:`needed_buffers`)."""
    minimal = with_buffers(schedule, [max(n, 1) for n in needed_buffers(schedule)])
    return minimal.replace(params={**schedule.params, "buffers": "minimal"})
