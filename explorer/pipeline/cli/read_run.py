"""``explorer read`` on a run folder: the same verdict ``explorer run`` printed when it ran."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional


def read(path: Path, json_out: bool, html: Optional[str] = None) -> int:
    """``run --collect``'s report; with ``--json`` the same document, marked ``kind: "pipeline"``;
    ``--html FILE`` also writes the grid of the schedule as run, its failure pinned and every
    message that broke the P2P contract marked at its receive, as the live follower draws it."""
    from explorer.pipeline.cli.run import report_result
    from explorer.pipeline.runtime.run_folder import collected

    result = collected(path)
    if html:
        write_html(path, result, html)
    extra: dict = {}
    if _engine(path) == "deepspeed":  # DeepSpeed's own engine ran it: its version and first failure
        from explorer.pipeline.runtime.deepspeed.engine import annotate

        result = annotate(result)
        extra = {"engine": "deepspeed", "deepspeed_version": result.details["deepspeed_version"]}
    head = {"kind": "pipeline", "source": "explorer run folder"}
    return report_result(
        result,
        argparse.Namespace(json=json_out, trace=None),
        {**head, **extra} if json_out else None,
    )


def write_html(path: Path, result, out: str) -> None:
    """The run's page: its verdict and the grid (:func:`~explorer.pipeline.views.live.pinned_grid`)."""
    import html as escape

    from explorer import inputs
    from explorer.pipeline.analysis.check import check
    from explorer.pipeline.runtime.run_folder import read_spec
    from explorer.pipeline.views.live import pinned_grid
    from explorer.ui.html import page

    report = check(read_spec(path).build_schedule(), other_model=False)
    failure = result.failure.to_dict() if result.failure else None
    said = failure["message"] if failure else "ran without a failure"
    doc = page(
        f"Pipeline run: {path}",
        [
            f"<h2>Verdict</h2><pre>{escape.escape(said)}</pre>",
            "<h2>Instruction grid</h2>",
            pinned_grid(report, failure, result.details.get("contract", [])),
        ],
    )
    inputs.write_text(out, doc, "HTML report")


def _engine(path: Path) -> str:
    """The engine named in the folder's spec.json ("explorer" for folders written before engines)."""
    try:
        return str(json.loads((Path(path) / "spec.json").read_text()).get("engine", "explorer"))
    except (OSError, ValueError, AttributeError):
        return "explorer"


__all__ = ["read"]
