"""``explorer read`` on a run folder: the same verdict ``explorer run`` printed when it ran."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def read(path: Path, json_out: bool) -> int:
    """``run --collect``'s report; with ``--json`` the same document, marked ``kind: "pipeline"``."""
    from explorer.pipeline.cli.run import report_result
    from explorer.pipeline.runtime.run_folder import collected

    result = collected(path)
    extra: dict = {}
    if _engine(path) == "deepspeed":  # DeepSpeed's own engine ran it: its version and first failure
        from explorer.pipeline.runtime.deepspeed.engine import annotate

        result = annotate(result)
        extra = {"engine": "deepspeed", "deepspeed_version": result.details["deepspeed_version"]}
    if json_out:
        print(
            json.dumps(
                {"kind": "pipeline", "source": "explorer run folder", **result.to_dict(), **extra}
            ),
            flush=True,
        )
        return 0 if result.ok and result.bitwise_equal_to_reference else 1
    return report_result(result, argparse.Namespace(json=False, trace=None))


def _engine(path: Path) -> str:
    """The engine named in the folder's spec.json ("explorer" for folders written before engines)."""
    try:
        return str(json.loads((Path(path) / "spec.json").read_text()).get("engine", "explorer"))
    except (OSError, ValueError, AttributeError):
        return "explorer"


__all__ = ["read"]
