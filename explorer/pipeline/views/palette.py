"""Colours and labels shared by every schedule view, so one kind looks the same everywhere.

Compute kinds get strong colours (forward blue, backward green, weight purple), P2P kinds
muted warm ones, bookkeeping grey: the eye should find the work first and the hazards
(red, the only red on the page) immediately.
"""

from __future__ import annotations

from explorer.pipeline.schedules.instructions import Kind

KIND_COLOURS: dict[Kind, str] = {
    Kind.LOAD: "#9e9e9e",
    Kind.FORWARD: "#1f77b4",
    Kind.BACKWARD: "#2ca02c",
    Kind.BACKWARD_INPUT: "#98df8a",
    Kind.BACKWARD_WEIGHT: "#9467bd",
    Kind.SEND_ACTIVATION: "#ffbb78",
    Kind.RECV_ACTIVATION: "#ff9f4a",
    Kind.SEND_GRAD: "#f7b6d2",
    Kind.RECV_GRAD: "#e377c2",
    Kind.REDUCE_GRADS: "#c7c7c7",
    Kind.REDUCE_TIED_GRADS: "#b0b0b0",
    Kind.OPTIMIZER_STEP: "#7f7f7f",
}
HAZARD = "#d62728"
SELECTED = "#ffb000"
MOVED = "#6a3d9a"  # instructions a fix moved
IDLE = "rgba(160, 160, 160, 0.35)"
IDLE_SOLID = "#e3e3e3"  # IDLE over white, for backgrounds that stand for idle time
ACTIVATION = "#1f77b4"
GRADIENT = "#2ca02c"
MEASURED_EDGE = "#222222"


def kind_label(kind: Kind) -> str:
    """Legend text: the code and DeepSpeed's name, e.g. ``RA RecvActivation``."""
    return f"{kind.code} {kind.deepspeed_name}"


def discrete_colorscale() -> list[list[object]]:
    """A heatmap colorscale with one flat band per :class:`Kind`, for ``z = kind value``.

    Use with ``zmin=-0.5`` and ``zmax=len(Kind) - 0.5`` so kind ``k`` falls in the middle of
    band ``k``; a continuous scale would blend neighbouring kinds into colours that mean nothing.
    """
    n = len(Kind)
    scale: list[list[object]] = []
    for kind in Kind:
        scale.append([kind.value / n, KIND_COLOURS[kind]])
        scale.append([(kind.value + 1) / n, KIND_COLOURS[kind]])
    return scale


__all__ = [
    "KIND_COLOURS",
    "HAZARD",
    "SELECTED",
    "MOVED",
    "IDLE",
    "IDLE_SOLID",
    "ACTIVATION",
    "GRADIENT",
    "MEASURED_EDGE",
    "kind_label",
    "discrete_colorscale",
]
