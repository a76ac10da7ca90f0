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

import weakref
from dataclasses import dataclass, field

import numpy as np

from explorer.pipeline.analysis import kernels
from explorer.pipeline.analysis.findings import Hazard
from explorer.pipeline.analysis.peaks import peak_per_group
from explorer.pipeline.analysis.refs import ref
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule

SLOTS = ("input", "output", "labels", "input-grad", "grad-layer")
_INPUT, _OUTPUT, _LABELS, _GRAD, _GRAD_LAYER = range(5)
_NONE = -1


# Events per instruction, in a fixed order inside the instruction (reads, then the probe,
# then writes): _EVENTS[stage class][kind] = ((slot, is_write, is_probe), ...) by sub-position.
# Stage classes: 0 middle, 1 first, 2 last, 3 first and last (a single stage).
_SUBS = 4  # a power of two: event index >> 2 is its row


def _event_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    slot = np.full((4, len(Kind), _SUBS), -1, dtype=np.int8)
    write = np.zeros((4, len(Kind), _SUBS), dtype=bool)
    probe = np.zeros((4, len(Kind), _SUBS), dtype=bool)
    for cls in range(4):
        first, last = cls in (1, 3), cls in (2, 3)

        def put(kind, sub, s, w=False, pr=False):
            slot[cls, kind, sub], write[cls, kind, sub], probe[cls, kind, sub] = s, w, pr

        if first:
            put(Kind.LOAD, 3, _INPUT, True)
        if last:
            put(Kind.LOAD, 2, _LABELS, True)
        put(Kind.RECV_ACTIVATION, 3, _INPUT, True)
        put(Kind.FORWARD, 0, _INPUT)
        if last:
            put(Kind.FORWARD, 1, _LABELS)
        put(Kind.FORWARD, 3, _OUTPUT, True)
        put(Kind.SEND_ACTIVATION, 0, _OUTPUT)
        put(Kind.RECV_GRAD, 3, _GRAD_LAYER, True)
        for back in (Kind.BACKWARD, Kind.BACKWARD_INPUT):
            put(back, 0, _OUTPUT)
            if not last:
                put(back, 1, _GRAD_LAYER)
            put(back, 2, _INPUT, pr=True)  # what inputs[b] holds when the gradient lands
        put(Kind.SEND_GRAD, 0, _GRAD)
        put(Kind.BACKWARD_WEIGHT, 0, _OUTPUT)
    return slot, write, probe


_TABLE = _event_table()


_EVENT_CACHE: dict[int, "_Cached"] = {}  # id(kind column) -> events and what follows from them


def _events(schedule: Schedule):
    """Reads and writes in stream order: (row, slot kind, is_write, is_probe).

    Probes are not reads of the instruction: they record what ``inputs[b]`` holds when a
    backward leaves its gradient, and are never reported as hazards themselves.
    """
    return _cached(schedule).events


@dataclass
class _Cached:
    kind: "weakref.ref[np.ndarray]"
    stage: np.ndarray
    num_stages: int
    events: tuple
    #: Per row: stage class * len(Kind) + kind, the index into the per-kind tables.
    combo: np.ndarray
    needed: dict[int, tuple[np.ndarray, list[int]]] = field(
        default_factory=dict
    )  # id(microbatch) -> (it, needed)


def _cached(schedule: Schedule) -> _Cached:
    """Events depend only on the kind and stage columns, which buffer reassignment
    (:func:`with_buffers`) shares with the original schedule, so they are cached on them."""
    hit = _EVENT_CACHE.get(id(schedule.kind))
    if (
        hit is not None
        and hit.kind() is schedule.kind
        and hit.stage is schedule.stage
        and hit.num_stages == schedule.num_stages
    ):
        return hit
    if len(_EVENT_CACHE) >= 8:
        _EVENT_CACHE.pop(next(iter(_EVENT_CACHE)))
    combo = _combo(schedule)
    entry = _Cached(
        weakref.ref(schedule.kind),
        schedule.stage,
        schedule.num_stages,
        _compute_events(combo),
        combo,
    )
    _EVENT_CACHE[id(schedule.kind)] = entry
    return entry


# One byte per (stage class, kind, sub-position): slot + 1 in the low bits, write and probe flags.
_CODE = (
    (_TABLE[0] + 1) | (_TABLE[1].astype(np.int8) << 3) | (_TABLE[2].astype(np.int8) << 4)
).astype(np.uint8)
_CODE_ROWS = _CODE.reshape(-1, _SUBS)
#: The same bytes, one 4-byte word per (stage class, kind): a 1-D gather moves a row at once.
_CODE_WORDS = np.ascontiguousarray(_CODE_ROWS).view(np.uint32).reshape(-1)


def _combo(schedule: Schedule) -> np.ndarray:
    """Per row, its stage class (see :data:`_TABLE`) times ``len(Kind)`` plus its kind."""
    st = schedule.stage
    last = schedule.num_stages - 1
    return ((st == 0).astype(np.intp) + 2 * (st == last)) * len(Kind) + schedule.kind


def _compute_events(combo: np.ndarray):
    flat = _CODE_WORDS[combo].view(np.uint8)  # (rows * _SUBS) bytes, one gather of words
    hit = np.flatnonzero(flat)  # row-major: already in stream order
    c = flat[hit]
    rows = hit >> 2  # hit // _SUBS; intp, so gathers by it need no index cast
    return rows, ((c & 7) - 1).astype(np.int32), (c & 8) != 0, (c & 16) != 0


def _resolve(
    key: np.ndarray, is_write: np.ndarray, is_write2: np.ndarray, at2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For events in stream order, the index of the last earlier ``is_write`` event with the
    same key (-1 if none), and at the ``at2`` events the last earlier ``is_write2`` event with
    the same key (-1 elsewhere). One stable sort by key serves both."""
    n = len(key)
    index_type = np.int32 if n < 2**31 else np.int64  # half the bytes to move when it fits
    if n == 0:
        return np.zeros(0, dtype=index_type), np.zeros(0, dtype=index_type)
    small = key.astype(np.uint16) if key.max() < 2**16 else key  # stable radix sort when it fits
    order = np.argsort(small, kind="stable").astype(index_type)
    index = np.arange(n, dtype=index_type)
    k_sorted = key[order]

    def last_before(filled: np.ndarray, at: np.ndarray) -> np.ndarray:
        prev = np.full(len(at), -1, dtype=index_type)
        later = at > 0
        prev[later] = filled[at[later] - 1]  # strictly earlier (a write does not see itself)
        found = (prev >= 0) & (k_sorted[np.maximum(prev, 0)] == k_sorted[at])
        return np.where(found, order[prev], -1)

    filled = np.maximum.accumulate(np.where(is_write[order], index, -1))
    prev = np.empty_like(filled)
    prev[0], prev[1:] = -1, filled[:-1]  # strictly earlier events (a write does not see itself)
    found = (prev >= 0) & (k_sorted[np.maximum(prev, 0)] == k_sorted)
    out = np.empty(n, dtype=index_type)
    out[order] = np.where(found, order[prev], -1)
    out2 = np.full(n, -1, dtype=index_type)
    at = np.flatnonzero(at2[order]).astype(index_type)
    filled2 = np.maximum.accumulate(np.where(is_write2[order], index, -1))
    out2[order[at]] = last_before(filled2, at)
    return out, out2


#: Keys up to this many buffers are checked by the compiled pass (a table of the last write per
#: key); a schedule with more (never a built-in one) is sorted instead.
_COMPILED_KEYS = 1 << 24


def _clean(
    key: np.ndarray,
    is_write: np.ndarray,
    is_state: np.ndarray,
    is_grad: np.ndarray,
    is_probe: np.ndarray,
    mb: np.ndarray,
) -> bool:
    """True when no read finds another micro-batch than its own (see :func:`buffer_hazards`).

    A schedule without hazards (the usual case) needs no per-event answer: when this says
    False, the caller resolves again to name each hazard. In stream order with a table of each
    buffer's last write where the compiled kernels are built (one pass), else by a sort.
    """
    n = len(key)
    if n == 0:
        return True
    flags = is_write.view(np.uint8) | (is_probe.view(np.uint8) << 1)  # one gather for four
    flags |= (is_grad.view(np.uint8) << 2) | (is_state.view(np.uint8) << 3)
    module = kernels.compiled()
    keys = int(key.max()) + 1
    if module is not None and keys <= _COMPILED_KEYS and int(key.min()) >= 0:
        return bool(
            module.clean(
                np.ascontiguousarray(key, dtype=np.int64),
                flags,
                np.ascontiguousarray(mb, dtype=np.int64),
                keys,
                _NONE,
            )
        )
    return _clean_numpy(key, flags, mb)


def _clean_numpy(key: np.ndarray, flags: np.ndarray, mb: np.ndarray) -> bool:
    """:func:`_clean` in numpy: the same resolution as :func:`_resolve`, but judged in key
    order, so nothing is mapped back to stream order (``flags``: 1 write, 2 probe, 4 input-grad
    read, 8 input-grad state). The compiled pass's oracle and its fallback."""
    n = len(key)
    if n == 0:
        return True
    index_type = np.int32 if n < 2**31 else np.int64
    small = key.astype(np.uint16) if key.max() < 2**16 else key  # stable radix sort when it fits
    order = np.argsort(small, kind="stable")  # intp: gathers by it need no index cast
    index = np.arange(n, dtype=index_type)
    k_sorted = key[order]
    mb_sorted = mb[order]
    flags = flags[order]
    write, probe, grad = (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0
    filled = np.maximum.accumulate(np.where(write, index, -1))
    prev = np.empty_like(filled)
    prev[0], prev[1:] = -1, filled[:-1]  # strictly earlier events (a write does not see itself)
    at_prev = np.maximum(prev, 0, dtype=np.intp)  # gathers by an intp index take the fast path
    found = np.where((prev >= 0) & (k_sorted[at_prev] == k_sorted), mb_sorted[at_prev], _NONE)
    if ((found != mb_sorted) & ~write & ~probe & ~grad).any():
        return False
    reads = np.flatnonzero(grad)
    if not len(reads):
        return True
    # SendGrad reads: the input-grad state left by the last input write or probe before them.
    filled2 = np.maximum.accumulate(np.where((flags & 8) != 0, index, -1))
    src = np.full(len(reads), -1, dtype=index_type)
    later = reads > 0
    src[later] = filled2[reads[later] - 1]
    at = np.maximum(src, 0, dtype=np.intp)
    own, held, lands_at = mb_sorted[at], found[at], probe[at]
    lands = lands_at & (held == own)
    value = np.where(lands, own, -2 - np.where(lands_at, held, own))
    g_found = np.where((src >= 0) & (k_sorted[at] == k_sorted[reads]), value, _NONE)
    return not (g_found != mb_sorted[reads]).any()


def buffer_hazards(schedule: Schedule) -> list[Hazard]:
    """Every read that finds the wrong micro-batch (or nothing), with the overwriting instruction."""
    rows, slot, is_write, is_probe = _events(schedule)
    st = schedule.stage[rows]
    mb = schedule.microbatch[rows]
    # DeepSpeed keeps one received gradient per stage; PyTorch one per micro-batch (its order
    # may post several gradient receives before their backwards), said by the schedule's params.
    one_grad = schedule.params.get("grad_receive") != "per-microbatch"
    buf = np.where((slot == _GRAD_LAYER) & one_grad, 0, schedule.buffer[rows])
    nbuf = int(max(schedule.buffers + (1,)))
    nbuf = max(nbuf, int(buf.max()) + 1 if len(buf) else 1)
    if schedule.num_stages * 5 * nbuf >= 2**31:  # keys below stay in int32 unless they cannot
        st, buf = st.astype(np.int64), buf.astype(np.int64)

    # 1. Every slot except input-grad, probes included: a read finds the last write of its
    #    (stage, slot, buffer).
    # 2. Input-grad state, from input writes (a new tensor: no .grad), backward probes (the
    #    gradient lands only if inputs[b] still holds the micro-batch) and SendGrad reads, on
    #    the same (stage, buffer) as the input: input-grad events share the input's key, where
    #    they are neither writes (for 1.) nor anything but reads (for 2.).
    is_grad = slot == _GRAD
    key = (st * 5 + np.where(is_grad, _INPUT, slot)) * nbuf + buf
    input_state = (is_write & (slot == _INPUT)) | is_probe
    if _clean(key, is_write, input_state, is_grad, is_probe, mb):
        return []
    src, g_src = _resolve(key, is_write, input_state, is_grad)
    found = np.where(src >= 0, mb[np.maximum(src, 0)], _NONE)

    def input_grad(at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """At input writes and probes: what inputs[b].grad holds after them (a micro-batch's
        gradient, or -2 - the micro-batch whose input holds no gradient), and the row that
        decided it (the overwriting write when a backward's gradient did not land)."""
        probe, own, held = is_probe[at], mb[at], found[at]
        lands = probe & (held == own)
        value = np.where(lands, own, -2 - np.where(probe, held, own)).astype(mb.dtype)
        held_row = np.where(src[at] >= 0, rows[np.maximum(src[at], 0)], -1)
        return value, np.where(probe & ~lands & (held_row >= 0), held_row, rows[at])

    hazards: list[tuple[int, Hazard]] = []
    bad = np.nonzero(~is_write & ~is_probe & ~is_grad & (found != mb))[0]
    for e in bad:
        hazards.append(
            (
                int(rows[e]),
                _hazard(
                    schedule,
                    int(rows[e]),
                    int(slot[e]),
                    int(mb[e]),
                    src=int(src[e]),
                    src_row=rows,
                    src_val=mb,
                ),
            )
        )
    reads = np.nonzero(is_grad)[0]
    read_src = g_src[reads]
    g_found = np.where(read_src >= 0, input_grad(np.maximum(read_src, 0))[0], _NONE)
    wrong = reads[g_found != mb[reads]]
    if len(wrong):
        g_val, g_origin = input_grad(np.arange(len(rows)))
        for j in wrong:
            row = int(rows[j])
            hazards.append(
                (
                    row,
                    _hazard(
                        schedule,
                        row,
                        _GRAD,
                        int(mb[j]),
                        src=int(g_src[j]),
                        src_row=g_origin,
                        src_val=g_val,
                    ),
                )
            )
    hazards.sort(key=lambda x: x[0])
    return [h for _, h in hazards]


def _hazard(schedule, row, slot, expected, *, src, src_row, src_val) -> Hazard:
    at = ref(schedule, row)
    buf = int(schedule.buffer[row])
    where = (
        "grad_layer"
        if slot == _GRAD_LAYER
        else f"{'inputs' if slot in (_INPUT, _GRAD) else SLOTS[slot].rstrip('s') + 's'}[{buf}]"
    )
    if src < 0:
        return Hazard(
            at=at,
            buffer=buf,
            slot=SLOTS[slot],
            expected_microbatch=expected,
            found_microbatch=None,
            overwritten_by=None,
            cause=f"stage {at.stage} step {at.step}: {at.deepspeed_repr} reads {where} for micro-batch {expected}, but nothing was written there before",
        )
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
        cause = (
            f"stage {at.stage} step {at.step}: {at.deepspeed_repr} must send micro-batch {expected}'s input gradient, "
            f"but {where} {what}: {writer.deepspeed_repr} at step {writer.step} replaced the tensor that carried it"
        )
    else:
        found = val
        cause = (
            f"stage {at.stage} step {at.step}: {at.deepspeed_repr} expects micro-batch {expected} in {where}, "
            f"but it holds micro-batch {val}, written by {writer.deepspeed_repr} at step {writer.step}"
        )
    return Hazard(
        at=at,
        buffer=buf,
        slot=SLOTS[slot],
        expected_microbatch=expected,
        found_microbatch=found,
        overwritten_by=writer,
        cause=cause,
    )


def needed_buffers(schedule: Schedule) -> list[int]:
    """Per stage, the peak number of micro-batches whose buffers are live at once.

    A micro-batch occupies a buffer on a stage from its first write there (load, receive or
    forward) to its last read (send, backward or weight gradient), in stream order. This is
    the fewest buffers any id assignment can use without overwriting live data. It does not
    depend on buffer ids, so a schedule and its buffer reassignments share one computation.
    """
    entry = _cached(schedule)
    hit = entry.needed.get(id(schedule.microbatch))
    if hit is None or hit[0] is not schedule.microbatch:
        hit = entry.needed[id(schedule.microbatch)] = (
            schedule.microbatch,
            _needed_buffers(schedule, entry.combo),
        )
    return list(hit[1])


#: Per (stage class, kind): whether the instruction touches a slot other than ``grad_layer``.
_HOLDS = ((_TABLE[0] >= 0) & (_TABLE[0] != _GRAD_LAYER)).any(axis=2).reshape(-1)


def _needed_buffers(schedule: Schedule, combo: np.ndarray) -> list[int]:
    # The rows with an event on a micro-batch's own slots, straight from the event table.
    st = schedule.stage
    rows = np.flatnonzero(_HOLDS[combo])
    p = schedule.num_stages
    st = st[rows].astype(np.int64)
    mb = schedule.microbatch[rows].astype(np.int64)
    m = max(schedule.num_microbatches, int(mb.max()) + 1 if len(mb) else 1, 1)
    module = kernels.compiled()
    if module is not None and p * m <= _COMPILED_KEYS:
        peaks = np.zeros(p, dtype=np.int64)
        module.needed(st, mb, peaks, p, m)
        return peaks.tolist()
    return _needed_buffers_numpy(rows, st, mb, p, m)


def _needed_buffers_numpy(
    rows: np.ndarray, st: np.ndarray, mb: np.ndarray, p: int, m: int
) -> list[int]:
    """:func:`_needed_buffers` in numpy: the compiled pass's oracle and its fallback."""
    ok = mb >= 0
    if ok.all():  # the usual case: skip three copies
        key, r = st * m + mb, rows
    else:
        key, r = st[ok] * m + mb[ok], rows[ok]
    # Events are in stream order, so rows ascend: with repeated indices the last assignment
    # wins, which gives the last row directly and, on the reversed arrays, the first one
    # (ufunc.at would do the same an order of magnitude slower).
    first = np.full(p * m, np.iinfo(np.int64).max)
    lastr = np.full(p * m, -1)
    first[key[::-1]] = r[::-1]
    lastr[key] = r
    live = lastr >= 0
    keys = np.nonzero(live)[0]
    stage_of = keys // m
    # +1 at the first row, -1 just after the last row; sweep per stage in row order.
    ev_stage = np.r_[stage_of, stage_of]
    ev_pos = np.r_[first[keys] * 2 + 1, lastr[keys] * 2 + 2]
    ev_delta = np.r_[np.ones(len(keys), np.int64), -np.ones(len(keys), np.int64)]
    order = np.lexsort((ev_pos, ev_stage))
    return peak_per_group(ev_stage[order], ev_delta[order], p)


def with_buffers(schedule: Schedule, counts: list[int]) -> Schedule:
    """The same schedule with ``counts[stage]`` buffers, ids reassigned as ``microbatch % count``."""
    # int32 throughout (the columns' own type; counts are small): a narrower modulo and no copies.
    c = np.asarray(counts, dtype=np.int32)
    mb = schedule.microbatch
    buf = np.where(
        (schedule.buffer >= 0) & (mb >= 0), mb % c[schedule.stage.astype(np.intp)], schedule.buffer
    )
    params = dict(schedule.params)
    return schedule.replace(
        buffer=buf.astype(np.int32, copy=False),
        buffers=tuple(int(x) for x in counts),
        params=params,
    )


def with_minimal_buffers(schedule: Schedule) -> Schedule:
    """Reassign buffers so each stage allocates exactly what it needs (see :func:`needed_buffers`)."""
    minimal = with_buffers(schedule, [max(n, 1) for n in needed_buffers(schedule)])
    return minimal.replace(params={**schedule.params, "buffers": "minimal"})


__all__ = ["SLOTS", "buffer_hazards", "needed_buffers", "with_buffers", "with_minimal_buffers"]
