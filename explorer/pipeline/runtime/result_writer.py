"""Rank 0's last act in either pipeline engine: compare with the reference and write the result file.

Explorer's engine (:mod:`.worker`, ``result.json``) and PyTorch's (:mod:`.torch_worker`,
``torch_result.json``) gather the same things to rank 0 - each rank's losses (the last
stage's rank has them) and each stage's gradients - and answer the same questions about them:
bitwise equal to the single-process reference, within tolerance, by how much, and whether the
gradients were averaged (see :mod:`.torch_engine` on why PyTorch's can differ in the last bit).
One writer, so both files carry the same keys and a reader never has to know which engine
wrote one. The file appears whole (written aside, then renamed), so a reader never sees half.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import torch

from explorer.pipeline.runtime.models import build_model
from explorer.pipeline.runtime.reference import Outcome, bitwise_equal, train_reference
from explorer.pipeline.runtime.spec import RunSpec

__all__ = ["ATOL", "RTOL", "write_result"]

#: The tolerance of ``within_tolerance`` (``torch.allclose``), written into every result file.
RTOL, ATOL = 1e-5, 1e-6


def write_result(
    path: Path,
    spec: RunSpec,
    stages: int,
    microbatches: int,
    gathered: Sequence[dict[str, Any]],
    iterations: int,
    device: str = "cpu",
) -> dict[str, Any]:
    """Compare what the ranks gathered (``losses``, ``grads`` per stage) with the reference; write ``path``.

    ``iterations`` is how many optimizer steps the engine took, so the reference takes as many;
    ``device`` is where rank 0 trained, and the reference trains there too (see
    :func:`~.reference.train_reference`): the verdict is bitwise on every device, and the
    file names the device and the tolerance of ``within_tolerance``.
    """
    losses = next(g["losses"] for g in gathered if g["losses"])
    grads = [part["grads"][s] for s in range(stages) for part in gathered if s in part["grads"]]
    run = Outcome(losses, grads)
    reference = train_reference(
        build_model(spec.model, stages, spec.microbatch_size, spec.seed),
        iterations,
        microbatches,
        device=device,
    )
    pairs = list(
        zip(
            [x for row in losses for x in row] + [g for st in grads for g in st],
            [x for row in reference.losses for x in row]
            + [g for st in reference.grads for g in st],
        )
    )
    diff = max((float((a - b).abs().max()) for a, b in pairs if a.numel()), default=0.0)
    close = all(torch.allclose(a, b, rtol=RTOL, atol=ATOL) for a, b in pairs)
    ref_size = sum(float(g.abs().sum()) for st in reference.grads for g in st)
    # Exactly M when the engine summed micro-batch gradients without averaging them.
    scale = sum(float(g.abs().sum()) for st in grads for g in st) / ref_size if ref_size else None
    values = [float(x) for row in losses for x in row]
    result = {
        "run": spec.run_id,
        "ok": True,
        "losses": [_number(x) for x in losses[-1]],
        "losses_by_iteration": [[_number(x) for x in row] for row in losses],
        "nonfinite_losses": sum(not math.isfinite(x) for x in values),
        "bitwise_equal_to_reference": bitwise_equal(run, reference),
        "max_abs_diff_to_reference": _number(diff),
        "within_tolerance": close,
        "grad_scale_to_reference": _number(scale),
        "digest": run.digest(),
        "reference_digest": reference.digest(),
        "reference_losses": [_number(x) for x in reference.losses[-1]],
        "reference_device": device,
        "tolerance": {"rtol": RTOL, "atol": ATOL},
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, allow_nan=False))
    tmp.replace(path)
    return result


def _number(x: Any) -> Any:
    """A float JSON can hold, or None for NaN and infinity (JSON has neither; a reader that
    meets ``NaN`` in a file refuses it). ``nonfinite_losses`` counts the losses written as null."""
    if x is None:
        return None
    value = float(x)
    return value if math.isfinite(value) else None
