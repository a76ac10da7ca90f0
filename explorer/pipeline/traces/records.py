"""``MeasuredTrace``: what actually ran, one row per instruction, in columns.

A record is ``(rank, stage, step, kind, microbatch, start, end)``; ``step`` is ``-1`` when the
source does not know it (a profiler sees actions, not DeepSpeed steps), which is why the
overlay matches measured to simulated rows by ``(stage, kind, microbatch)``. Times are in
``unit`` (seconds unless said otherwise). What only some readers know rides along in columns
of its own, with a neutral value where a reader does not know it: ``iteration`` (-1),
``action`` (PyTorch's label, ``1F3``; ""), ``wait`` (seconds a compute was blocked on its
input; 0) and ``arrived`` (when that input arrived; NaN). Every reader gives this one record,
and every measured analysis (:mod:`explorer.pipeline.analysis.measured`) takes it. Columns
rather than objects, for the same reason as :class:`explorer.pipeline.schedules.Schedule`: a
real run of 64 stages has hundreds of thousands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Union

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.schedules.instructions import KIND_BY_CODE, KIND_BY_DEEPSPEED_NAME, Kind

KindLike = Union[Kind, int, str]
#: A record's value: a number, or a kind as :func:`as_kind` reads it.
RecordValue = Union[int, float, str]
_FIELDS = ("rank", "stage", "step", "kind", "microbatch", "start", "end")
#: The columns only some readers fill, and the value of a row whose reader does not know it.
_OPTIONAL: dict[str, object] = {"iteration": -1, "action": "", "wait": 0.0, "arrived": np.nan}


def _column(values: list, name: str) -> np.ndarray:
    """One optional column in its dtype (labels as Python strings, so they print as written)."""
    if name == "action":
        return np.array([str(v) for v in values], dtype=object).reshape(-1)
    try:
        return np.array(values, dtype=np.int64 if name == "iteration" else float).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(
            f"measured records: {name!r} must be a number on every record that has one"
        ) from None


def _empty(name: str) -> np.ndarray:
    """An empty optional column as a dataclass default (filled to length by ``__post_init__``)."""
    return field(default_factory=lambda: _column([], name))


def as_kind(value: KindLike | float) -> Kind:
    """A :class:`Kind` from itself, its value, its code (``RA``) or DeepSpeed's name (``RecvActivation``);
    anything else (a float too) is refused with :class:`InputError`."""
    if isinstance(value, Kind):
        return value
    if isinstance(value, (int, np.integer)):
        return Kind(int(value))
    if value in KIND_BY_CODE:
        return KIND_BY_CODE[value]
    name = "ForwardPass" if value == "Forward" else "BackwardPass" if value == "Backward" else value
    if name in KIND_BY_DEEPSPEED_NAME:
        return KIND_BY_DEEPSPEED_NAME[name]
    raise InputError(
        f"unknown instruction kind {value!r}: use a code ({', '.join(KIND_BY_CODE)}) or a DeepSpeed name"
    )


@dataclass(frozen=True, eq=False)
class MeasuredTrace:
    """Measured instruction intervals as parallel columns (see the module docstring)."""

    rank: np.ndarray
    stage: np.ndarray
    step: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    start: np.ndarray
    end: np.ndarray
    unit: str = "s"
    source: str = ""
    #: Ranks that stopped before the end (failed, killed, or wrote no end): their time after
    #: their last instruction is not the schedule's bubble (see :mod:`explorer.pipeline.analysis.breakdown`).
    stopped: tuple[int, ...] = ()
    iteration: np.ndarray = _empty("iteration")
    action: np.ndarray = _empty("action")
    wait: np.ndarray = _empty("wait")
    arrived: np.ndarray = _empty("arrived")

    def __post_init__(self) -> None:
        """An optional column left out is filled with its neutral value (see the module docstring)."""
        n = len(self.rank)
        for name, neutral in _OPTIONAL.items():
            col = getattr(self, name)
            if len(col) == n:
                continue
            if len(col):
                raise InputError(
                    f"measured column {name!r} has {len(col)} rows where the trace has {n}"
                )
            object.__setattr__(self, name, _column([neutral] * n, name))

    def __len__(self) -> int:
        return len(self.rank)

    def take(self, which: np.ndarray) -> "MeasuredTrace":
        """The rows ``which`` selects (a mask or indices), every column alike."""
        cols = {f: getattr(self, f)[which] for f in _FIELDS + tuple(_OPTIONAL)}
        return MeasuredTrace(**cols, unit=self.unit, source=self.source, stopped=self.stopped)

    def of_iteration(self, iteration: Optional[int] = None) -> "MeasuredTrace":
        """The rows of one iteration, the last by default (the first pays for warm-up)."""
        if not len(self):
            return self
        it = int(self.iteration.max()) if iteration is None else iteration
        return self.take(self.iteration == it)

    @classmethod
    def from_records(
        cls, records: Iterable[Mapping[str, RecordValue]], unit: str = "s", source: str = ""
    ) -> "MeasuredTrace":
        """From mappings with keys rank, stage, kind, microbatch, start, end and optionally step,
        iteration, action, wait and arrived (None: unknown)."""
        rows = []
        extra: dict[str, list] = {name: [] for name in _OPTIONAL}
        for i, rec in enumerate(records):
            try:
                rows.append(
                    (
                        int(rec["rank"]),
                        int(rec["stage"]),
                        int(rec.get("step", -1)),
                        int(as_kind(rec["kind"])),
                        int(rec.get("microbatch", -1)),
                        float(rec["start"]),
                        float(rec["end"]),
                    )
                )
            except KeyError as exc:
                raise InputError(
                    f"measured record {i} has no {exc.args[0]!r}: each record needs {', '.join(_FIELDS)} (step optional)"
                ) from None
            if rows[-1][6] < rows[-1][5]:
                raise InputError(
                    f"measured record {i} ends ({rows[-1][6]}) before it starts ({rows[-1][5]})"
                )
            for name, neutral in _OPTIONAL.items():
                value = rec.get(name)
                extra[name].append(neutral if value is None else value)
        arr = np.array(rows, dtype=float).reshape(-1, 7)
        ints = [arr[:, j].astype(np.int64) for j in range(5)]
        col = {name: _column(values, name) for name, values in extra.items()}
        return cls(
            *ints,
            start=arr[:, 5],
            end=arr[:, 6],
            unit=unit,
            source=source,
            iteration=col["iteration"],
            action=col["action"],
            wait=col["wait"],
            arrived=col["arrived"],
        )

    def to_records(self) -> list[dict]:
        """The rows as plain dicts (JSON-ready), kinds by code."""
        return [
            {
                "rank": int(r),
                "stage": int(s),
                "step": int(t),
                "kind": Kind(int(k)).code,
                "microbatch": int(m),
                "start": float(a),
                "end": float(b),
            }
            for r, s, t, k, m, a, b in zip(
                self.rank, self.stage, self.step, self.kind, self.microbatch, self.start, self.end
            )
        ]

    @staticmethod
    def concat(traces: Iterable["MeasuredTrace"]) -> "MeasuredTrace":
        """One trace from several (one profiler file per rank); units must agree."""
        traces = list(traces)
        if not traces:
            return MeasuredTrace.from_records([])
        units = {t.unit for t in traces}
        if len(units) > 1:
            raise InputError(
                f"cannot join traces measured in different units {sorted(units)}: convert them first"
            )
        cols = {
            f: np.concatenate([getattr(t, f) for t in traces]) for f in _FIELDS + tuple(_OPTIONAL)
        }
        return MeasuredTrace(
            **cols,
            unit=traces[0].unit,
            source="; ".join(t.source for t in traces if t.source),
            stopped=tuple(sorted({r for t in traces for r in t.stopped})),
        )


__all__ = ["KindLike", "as_kind", "MeasuredTrace"]
