"""What a PyTorch engine run folder says of its results: ``torch_result.json`` against the reference.

``explorer run --engine torch --out DIR`` leaves profiler traces, message lines and, once rank 0
finished, ``torch_result.json``: its losses and gradients against the single-process reference.
The traces and lines say how the run went, this file whether what it computed was right, so every
reader of such a folder (``explorer read``, ``explorer check RUN_FOLDER``) takes its verdict from
here too: a folder read without it called a run with 4x the gradients clean.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from explorer import inputs
from explorer.errors import InputError, excerpt

#: The file rank 0 writes when the run finished.
RESULT_FILE = "torch_result.json"
#: The keys kept of it: the verdict (within tolerance, as ``--engine torch`` judges) and why.
REFERENCE_KEYS = (
    "within_tolerance",
    "bitwise_equal_to_reference",
    "max_abs_diff_to_reference",
    "grad_scale_to_reference",
)


def read_reference(folder: Path) -> Optional[dict]:
    """The run's results against the reference, or None where the folder holds no such file
    (profiler traces alone, or a run that never finished)."""
    path = Path(folder) / RESULT_FILE if Path(folder).is_dir() else None
    if path is None or not path.is_file():
        return None
    doc = inputs.read_json(str(path), "")
    if not isinstance(doc, dict) or not all(k in doc for k in REFERENCE_KEYS):
        raise InputError(f"{excerpt(str(path))} is not what explorer run --engine torch writes")
    if not isinstance(doc["within_tolerance"], bool):
        raise InputError(f"{excerpt(str(path))}: within_tolerance is not true or false; edited?")
    return {k: doc[k] for k in REFERENCE_KEYS}


def wrong_result(reference: Optional[dict]) -> Optional[str]:
    """One sentence when the results are off the reference (None: right, or not known)."""
    if reference is None or reference["within_tolerance"]:
        return None
    scale = reference["grad_scale_to_reference"]
    diff = reference["max_abs_diff_to_reference"]
    return (
        "its losses and gradients are not within tolerance of the reference"
        + (f" (max |diff| {diff:.3g}" if isinstance(diff, (int, float)) else " (")
        + (f", gradients {scale:.3g}x the reference's)" if isinstance(scale, (int, float)) else ")")
    )


__all__ = ["REFERENCE_KEYS", "RESULT_FILE", "read_reference", "wrong_result"]
