"""The timeline's step walk: compiled where it is built, numpy's otherwise, the same floats.

:func:`explorer.pipeline.analysis.timeline.per_step_columns` lays a schedule out as a dense
``(step, slot, rank)`` grid and then walks it one step at a time: every step starts from the ends
of the steps before it, so the walk cannot be one numpy call. In numpy it is a handful of calls
per step on rows of a few dozen cells (at 64 x 1,024, 2,174 steps: a third of the whole check,
all of it call overhead). ``_kernels.c`` does the same operations in the same order without
the calls; :func:`walk_steps_numpy` is its oracle (the tests compare the two bit for bit) and the
fallback where no C compiler built it.
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from explorer.pipeline.analysis import kernels

Walk = Callable[..., None]


def walk_steps_numpy(
    start: np.ndarray,
    reads: np.ndarray,
    delay: np.ndarray,
    before: np.ndarray,
    has_inner: np.ndarray,
    bounds: np.ndarray,
    inner_cell: np.ndarray,
    inner_src: np.ndarray,
    inner_delay: np.ndarray,
    num_steps: int,
    num_slots: int,
    num_ranks: int,
) -> None:
    """The step walk of :func:`per_step_columns`, in place on ``start`` (the grid's cells, then
    the two constant cells), one step at a time in numpy.

    Each cell's bound is the start of the cell it ``reads`` plus its ``delay``; a rank runs its
    slots back to back (``before``: the cost of the slots before each); steps flagged in
    ``has_inner`` hold waits inside the step (``bounds[t]:bounds[t + 1]`` of the ``inner_*``
    lists), raised in rounds. The compiled walk (``_kernels.c``) does the same operations in
    the same order; this one is its oracle and the fallback where it is not built.
    """
    cells_per_step = num_slots * num_ranks
    shape = (num_steps, num_slots, num_ranks)
    grid = start[: num_steps * cells_per_step].reshape(shape)
    reads_grid, delay_grid, before_grid = (x.reshape(shape) for x in (reads, delay, before))
    inner_flags = has_inner.tolist()
    for t in range(num_steps):
        step_start = grid[t]
        step_before = before_grid[t]
        np.add(start[reads_grid[t]], delay_grid[t], out=step_start)  # each cell's bound
        if inner_flags[t]:
            _inner_rounds(
                step_start,
                step_before,
                inner_cell[bounds[t] : bounds[t + 1]] - t * cells_per_step,
                inner_src[bounds[t] : bounds[t + 1]] - t * cells_per_step,
                inner_delay[bounds[t] : bounds[t + 1]],
            )
            continue
        step_start -= step_before
        # The running maximum along the slots, one row of ranks at a time: a few calls of
        # np.maximum on 64 cells cost a third of one np.maximum.accumulate on the block.
        prev = step_start[0]
        for k in range(1, num_slots):
            row = step_start[k]
            np.maximum(row, prev, out=row)
            prev = row
        step_start += step_before


def _inner_rounds(
    step_start: np.ndarray,
    step_before: np.ndarray,
    cells: np.ndarray,
    src: np.ndarray,
    delay: np.ndarray,
) -> None:
    """Starts of one step whose waits point inside it, in place: ``step_start`` holds each
    cell's bound from earlier steps; raise the bounds in rounds until nothing moves."""
    bound = step_start.copy()
    flat_bound = bound.reshape(-1)
    flat = step_start.reshape(-1)
    for _ in range(step_start.size + 3):
        np.subtract(bound, step_before, out=step_start)
        np.maximum.accumulate(step_start, axis=0, out=step_start)
        step_start += step_before
        candidate = flat[src] + delay
        current = flat_bound[cells]
        if (candidate <= current).all():
            return
        flat_bound[cells] = np.maximum(current, candidate)


def _compiled() -> Optional[Walk]:
    """The compiled walk, or None where the kernels were not built."""
    module = kernels.compiled()
    if module is None:
        return None
    compiled = module.walk

    def walk(
        start: np.ndarray,
        reads: np.ndarray,
        delay: np.ndarray,
        before: np.ndarray,
        has_inner: np.ndarray,
        bounds: np.ndarray,
        inner_cell: np.ndarray,
        inner_src: np.ndarray,
        inner_delay: np.ndarray,
        num_steps: int,
        num_slots: int,
        num_ranks: int,
    ) -> None:
        """The compiled walk on the same arguments, each as the C side reads it (contiguous;
        float64, int64 or bytes): a copy only where the caller's array is not already so."""
        compiled(
            start,
            np.ascontiguousarray(reads, dtype=np.int64),
            np.ascontiguousarray(delay, dtype=np.float64),
            np.ascontiguousarray(before, dtype=np.float64),
            np.ascontiguousarray(has_inner, dtype=np.uint8),
            np.ascontiguousarray(bounds, dtype=np.int64),
            np.ascontiguousarray(inner_cell, dtype=np.int64),
            np.ascontiguousarray(inner_src, dtype=np.int64),
            np.ascontiguousarray(inner_delay, dtype=np.float64),
            num_steps,
            num_slots,
            num_ranks,
        )

    return walk


_COMPILED = _compiled()


def compiled_walk() -> Optional[Walk]:
    """The compiled walk, None where it is not built (the tests require it on ``make test``)."""
    return _COMPILED


def step_walk() -> Walk:
    """The walk :func:`per_step_columns` uses: the compiled one where built, else numpy's."""
    return _COMPILED or walk_steps_numpy


__all__ = ["compiled_walk", "step_walk", "walk_steps_numpy"]
