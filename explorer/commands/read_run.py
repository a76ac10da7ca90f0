"""``explorer read`` on a run folder: the same verdict ``explorer run`` printed when it ran."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def read(path: Path, json_out: bool) -> int:
    """``run --collect``'s report; with ``--json`` the same document, marked ``kind: "pipeline"``."""
    from explorer.commands.run import _collected, _report

    result = _collected(path)
    if json_out:
        print(
            json.dumps({"kind": "pipeline", "source": "explorer run folder", **result.to_dict()}),
            flush=True,
        )
        return 0 if result.ok and result.bitwise_equal_to_reference else 1
    return _report(result, argparse.Namespace(json=False, trace=None))


__all__ = ["read"]
