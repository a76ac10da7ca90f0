"""Level of detail for interval charts: what a screen can show, not everything at once.

A 64-stage, 512-micro-batch schedule has about 130,000 instructions; drawn one bar or one
labelled cell each, the figure's JSON runs to tens of MB and the page freezes for minutes.
A plot is about 1,000 px wide, so no more than a few hundred columns can be told apart:
:func:`dominant` bins intervals per row into at most ``bins`` columns and keeps, for each bin,
the category that covers most of it. The result is one small heatmap whatever the schedule's
size; the views switch back to exact bars and cells once a user zooms to a range that is
small enough (the widget re-renders on the figure's relayout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

#: Columns of an overview heatmap: a few per pixel of a full-width plot would be wasted.
OVERVIEW_BINS = 480


@dataclass(frozen=True)
class Raster:
    """``z[row, bin]``: the dominant category (NaN where nothing runs); bins of ``width`` from ``x0``."""

    z: np.ndarray
    x0: float
    width: float

    @property
    def centres(self) -> np.ndarray:
        return self.x0 + (np.arange(self.z.shape[1]) + 0.5) * self.width


def dominant(
    row: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    category: np.ndarray,
    num_rows: int,
    x_range: tuple[float, float],
    bins: int = OVERVIEW_BINS,
    num_categories: Optional[int] = None,
) -> Raster:
    """Per row and bin of ``x_range``, the category whose intervals cover most of the bin."""
    cover, x0, width = _category_cover(
        row, start, end, category, num_rows, x_range, bins, num_categories
    )
    z = np.argmax(cover, axis=2).astype(float)
    z[cover.max(axis=2) <= 1e-9] = np.nan
    return Raster(z=z, x0=x0, width=width)


def _category_cover(
    row: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    category: np.ndarray,
    num_rows: int,
    x_range: tuple[float, float],
    bins: int,
    num_categories: Optional[int],
) -> tuple[np.ndarray, float, float]:
    """How much of each (row, bin) each category covers; the categories are counted from the
    data unless given (a view with a fixed palette gives them, so colours never shift)."""
    cats = int(
        num_categories
        if num_categories is not None
        else (int(np.max(category)) + 1 if len(category) else 1)
    )
    return _cover(row, start, end, np.asarray(category), num_rows, max(cats, 1), x_range, bins)


#: A runner-up kind covering at least this share of a bin's busy time is drawn beside the first.
MIX_SHARE = 0.2


def first_two(
    row: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    category: np.ndarray,
    num_rows: int,
    x_range: tuple[float, float],
    bins: int = OVERVIEW_BINS,
    num_categories: Optional[int] = None,
    share: float = MIX_SHARE,
) -> tuple[Raster, Raster]:
    """Per row and bin, the category covering most of the bin and the runner-up.

    The runner-up is the first again unless it covers at least ``share`` of the bin's busy
    time. One colour per bin hides a mix: 1F1B's steady state alternates a forward (1 tick)
    and a backward (2 ticks) inside every bin, so the dominant kind alone paints it solid
    backward, like GPipe's drain; drawn as two half-rows it reads as alternating.
    """
    cover, x0, width = _category_cover(
        row, start, end, category, num_rows, x_range, bins, num_categories
    )
    order = np.argsort(-cover, axis=2, kind="stable")
    first = order[:, :, 0].astype(float)
    top = np.take_along_axis(cover, order[:, :, :1], axis=2)[:, :, 0]
    runner = (
        np.take_along_axis(cover, order[:, :, 1:2], axis=2)[:, :, 0]
        if cover.shape[2] > 1
        else np.zeros_like(top)
    )
    busy = cover.sum(axis=2)
    mixed = runner >= share * np.maximum(busy, 1e-12)
    second = np.where(mixed, order[:, :, 1] if cover.shape[2] > 1 else order[:, :, 0], first)
    second = second.astype(float)
    empty = top <= 1e-9
    first[empty] = np.nan
    second[empty] = np.nan
    return Raster(z=first, x0=x0, width=width), Raster(z=second, x0=x0, width=width)


def mean_count(
    row: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    num_rows: int,
    x_range: tuple[float, float],
    bins: int = OVERVIEW_BINS,
) -> Raster:
    """Per row and bin, how many intervals are open on average (e.g. buffers holding data)."""
    cover, x0, width = _cover(
        row, start, end, np.zeros(len(row), dtype=np.int64), num_rows, 1, x_range, bins
    )
    return Raster(z=cover[:, :, 0], x0=x0, width=width)


def _cover(row, start, end, category, num_rows: int, cats: int, x_range, bins: int):
    """``cover[row, bin, category]``: the share of each bin that intervals of that category cover."""
    x0, x1 = float(x_range[0]), float(x_range[1])
    bins = max(1, int(bins))
    width = (x1 - x0) / bins if x1 > x0 else 1.0
    cover = np.zeros((num_rows, bins, cats))
    a = np.clip((np.asarray(start, float) - x0) / width, 0, bins)
    b = np.clip((np.asarray(end, float) - x0) / width, 0, bins)
    keep = b > a
    a, b = a[keep], b[keep]
    r, c = np.asarray(row)[keep].astype(np.int64), category[keep].astype(np.int64)
    first = np.floor(a).astype(np.int64)
    last = np.minimum(np.ceil(b).astype(np.int64) - 1, bins - 1)
    span = np.maximum(last - first + 1, 1)
    # One piece per (interval, bin it touches): the pieces sum to n + the bins crossed.
    owner = np.repeat(np.arange(len(a)), span)
    offset = np.arange(len(owner)) - np.repeat(np.cumsum(span) - span, span)
    bin_of = first[owner] + offset
    piece = np.minimum(b[owner], bin_of + 1) - np.maximum(a[owner], bin_of)
    np.add.at(cover, (r[owner], bin_of, c[owner]), np.maximum(piece, 0.0))
    return cover, x0, width


def window(x_range: Optional[tuple[float, float]], lo: float, hi: float) -> tuple[float, float]:
    """The visible range clipped to the data's, or the whole range when none is given."""
    if x_range is None:
        return lo, hi
    a, b = max(lo, float(x_range[0])), min(hi, float(x_range[1]))
    return (a, b) if b > a else (lo, hi)


__all__ = [
    "OVERVIEW_BINS",
    "MIX_SHARE",
    "Raster",
    "dominant",
    "first_two",
    "mean_count",
    "window",
]
