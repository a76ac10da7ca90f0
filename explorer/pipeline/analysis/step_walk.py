"""The timeline's step walk in numpy: the compiled version's oracle and its fallback.

:func:`explorer.pipeline.analysis.timeline.per_step_columns` lays a schedule out as a dense
``(step, slot, rank)`` grid of costs and then walks it one step at a time: every step starts
from the ends of the steps before it, so the walk cannot be one numpy call. In numpy it is a
handful of grid-wide passes (the running sums along the slots, the cell each cell reads, the
delays) and then a handful of calls per step on rows of a few dozen cells: at 64 x 1,024 (2,174
steps) a third of the whole check, most of it call overhead. ``_kernels.c`` (``per_step``) does
the same operations in the same order, step by step, without the calls or the grids, from the
rows themselves; :func:`walk_numpy` is its oracle (the tests compare the two bit for bit) and
the fallback where no C compiler built it.

What a walk computes, cell by cell: inside a step a rank runs its slots back to back, so a slot
starts at the latest of its own lower bound and the end of the slot before it. With ``before``
the cost of the slots before each slot, that is ``max.accumulate(bound - before) + before``. The
lower bounds: for slot 0 (the rank's clock, no row), the end of the rank's last slot in the
previous step; for a waiting cell, its source cell's start plus its delay; else none. Waits whose
source is in the same step are raised in rounds until nothing moves.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class StepGrid(NamedTuple):
    """The grid's shape and each cell's cost (``cost[(step * slots + slot) * ranks + rank]``)."""

    steps: int
    slots: int
    ranks: int
    cost: np.ndarray


class Waits(NamedTuple):
    """Cells whose start is bounded by another cell's start plus a delay."""

    cell: np.ndarray
    src: np.ndarray
    delay: np.ndarray


def walk_numpy(grid: StepGrid, earlier: Waits, inner: Waits, bounds: np.ndarray) -> np.ndarray:
    """The walk in numpy: grid-wide passes for each cell's bound, then one step at a time."""
    steps, slots, ranks = grid.steps, grid.slots, grid.ranks
    per_step = slots * ranks
    cells = steps * per_step
    shape = (steps, slots, ranks)
    cost_grid = grid.cost.reshape(shape)
    before_grid = cost_grid.copy()  # the running sum along the slots (as cumsum), less the slot
    for k in range(1, slots):
        before_grid[:, k] += before_grid[:, k - 1]
    before_grid -= cost_grid
    # The cell each cell reads for its bound, and the delay added to that cell's start.
    never, zero = cells, cells + 1
    reads = np.full(cells, never, dtype=np.intp)  # the loop's gathers take intp without a cast
    reads_grid = reads.reshape(shape)
    reads_grid[0, 0] = zero
    # slot 0 of step t reads the last slot of step t - 1, the row of cells just before it
    reads_grid[1:, 0] = (
        np.arange(1, steps, dtype=np.intp)[:, None] * per_step - ranks + np.arange(ranks)
    )
    reads[earlier.cell] = earlier.src
    delay_grid = np.zeros(shape)
    delay_grid[1:, 0] = cost_grid[:-1, -1]  # the clock: the end of the previous last slot
    delay = delay_grid.reshape(-1)
    delay[earlier.cell] = earlier.delay

    start = np.empty(cells + 2)  # the grid's starts, then the two constant cells
    start[never], start[zero] = -np.inf, 0.0
    grid_start = start[:cells].reshape(shape)
    has_inner = (bounds[1:] > bounds[:-1]).tolist()
    for t in range(steps):
        step_start = grid_start[t]
        step_before = before_grid[t]
        np.add(start[reads_grid[t]], delay_grid[t], out=step_start)  # each cell's bound
        if has_inner[t]:
            lo, hi = bounds[t], bounds[t + 1]
            _inner_rounds(
                step_start,
                step_before,
                inner.cell[lo:hi] - t * per_step,
                inner.src[lo:hi] - t * per_step,
                inner.delay[lo:hi],
            )
            continue
        step_start -= step_before
        # The running maximum along the slots, one row of ranks at a time: a few calls of
        # np.maximum on 64 cells cost a third of one np.maximum.accumulate on the block.
        prev = step_start[0]
        for k in range(1, slots):
            row = step_start[k]
            np.maximum(row, prev, out=row)
            prev = row
        step_start += step_before
    return start


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


__all__ = ["StepGrid", "Waits", "walk_numpy"]
