"""One way to check a teaching notebook: committed clean and thin, then run in its real kernel.

Every notebook test had its own copy of the kernel-spec install, the nbclient call and the
output gathering; they differed only in the kernel, the time limit and what they asserted.
Here they are written once: :func:`assert_committed_clean_and_thin` needs no kernel (fast
tier), :func:`execute` runs the notebook in the kernel its metadata names, installed into
this environment first when missing (the same command as ``make kernels``), and the
gatherers read what the cells printed and which kinds of output they sent.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

from notebook_file import read_notebook

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"

__all__ = [
    "NOTEBOOKS",
    "PLOTLY",
    "WIDGET",
    "assert_committed_clean_and_thin",
    "ensure_kernel",
    "execute",
    "mimes",
    "printed",
    "stderr",
    "texts",
]


def assert_committed_clean_and_thin(
    path: Path, kernel: str, max_lines: int = 8, cite: Optional[str] = None
) -> Any:
    """The notebook names ``kernel``, has no outputs, no ``def``/``class`` and short code cells.

    ``cite``: a public address its text must give (the user story it tells), instead of a
    folder of this workplace that the repository lacks. Returns the notebook read as JSON.
    """
    nb = read_notebook(path)
    assert nb.metadata.kernelspec.name == kernel, nb.metadata.kernelspec
    text = "\n".join(c.source for c in nb.cells)
    assert "reference/seeds" not in text, "cite the public thread, not a folder the repo lacks"
    if cite is not None:
        assert cite in text, f"{path.name} should cite {cite}"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        assert cell.outputs == [] and cell.execution_count is None, "commit without outputs"
        assert not any(
            line.lstrip().startswith(("def ", "class ")) for line in cell.source.splitlines()
        ), "thin notebooks: code belongs in explorer/"
        assert len(cell.source.splitlines()) <= max_lines, cell.source
    return nb


def ensure_kernel(name: str) -> str:
    """``name``'s kernel spec (from ``kernels/``), installed into this venv when missing."""
    from jupyter_client.kernelspec import KernelSpecManager

    if name not in KernelSpecManager().find_kernel_specs():
        subprocess.run(
            [sys.executable, "-m", "jupyter", "kernelspec", "install", "--sys-prefix",
             "--replace", str(REPO / "kernels" / name)],
            check=True,
            capture_output=True,
        )  # fmt: skip
    assert name in KernelSpecManager().find_kernel_specs(), f"kernel spec {name} not installed"
    return name


def execute(path: Path, timeout: int = 300, cwd: Optional[Path] = None) -> Any:
    """The notebook run top to bottom in the kernel it names; nbformat's node, outputs filled.

    Widget state is not stored (megabytes of plotly.js). ``cwd``: where the kernel starts
    (the notebook's folder by default; a temporary one for notebooks that write run folders).
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        kernel_name=ensure_kernel(nb.metadata.kernelspec.name),
        timeout=timeout,
        store_widget_state=False,
        resources={"metadata": {"path": str(cwd or path.parent)}},
    ).execute()
    return nb


def _outputs(nb: Any) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def printed(nb: Any) -> str:
    """What the cells printed (streams only), one string."""
    return "\n".join(o.get("text", "") for o in _outputs(nb))


def texts(nb: Any) -> str:
    """Everything the cells printed and every plain-text result, one string."""
    return "\n".join(
        str(o.get("data", {}).get("text/plain", "")) + o.get("text", "") for o in _outputs(nb)
    )


def mimes(nb: Any) -> list[set[str]]:
    """The kinds of each rich output, in order (the last one is the notebook's last display)."""
    return [set(o.get("data", {})) for o in _outputs(nb) if "data" in o]


def stderr(nb: Any) -> list[str]:
    """What the cells wrote to standard error: a teaching notebook writes nothing there."""
    return [o.text for o in _outputs(nb) if o.get("name") == "stderr"]
