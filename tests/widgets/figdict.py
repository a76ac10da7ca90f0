"""Read ``fig.to_dict()`` the way the browser does.

plotly >= 6 writes numpy arrays into ``to_dict()`` as typed arrays
(``{"dtype": "f8", "bdata": <base64>, "shape": "4, 22"}``), which is what goes over the wire
to plotly.js. The tests decode those back to plain lists so they assert on the content the
page receives, not on our numpy inputs.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np


def decode(value: Any) -> Any:
    """Recursively turn plotly typed arrays into (nested) lists; everything else unchanged."""
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:
            arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
            if "shape" in value:
                arr = arr.reshape([int(x) for x in str(value["shape"]).split(",")])
            return arr.tolist()
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [decode(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def figure_dict(fig: Any) -> dict:
    """``fig.to_dict()`` with every typed array decoded."""
    return decode(fig.to_dict())


def trace(fig_dict: dict, name: str) -> dict:
    """The one trace called ``name`` (fails loudly if missing or duplicated)."""
    found = [t for t in fig_dict["data"] if t.get("name") == name]
    assert len(found) == 1, (
        f"expected one trace named {name!r}, found {[t.get('name') for t in fig_dict['data']]}"
    )
    return found[0]
