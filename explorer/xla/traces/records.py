"""Typed records of one XLA run: steps, distinct graphs, and a structured failure.

The child process, the assembly in the parent, the views, the widget, the CLI's ``--json``
and the tests all read these records, so "graph" always means one compiled program named by
torch_xla's graph hash, and "step" one call of the user's step function followed by a sync.
Pure python: no torch here.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from explorer.failure import Failure

#: The keys of one step in the CLI's JSON document (issue 6 fixes them).
STEP_KEYS = (
    "step",
    "compiled",
    "graph_hash",
    "compile_ms",
    "execute_ms",
    "num_parameters",
    "cause",
    "diff_summary",
)


@dataclass
class Graph:
    """One distinct compiled program, with its HLO when the dump could be joined to it.

    ``step`` is the step that compiled it (``-1``: before the first step, e.g. while FSDP
    sharded the parameters). ``closest`` is the earlier graph it was compared against, and
    ``diff_summary`` the HLO diff's paragraph for that pair.
    """

    graph_hash: str
    step: int
    xla_cause: str = ""
    frames: list[str] = field(default_factory=list)
    num_parameters: Optional[int] = None
    num_outputs: Optional[int] = None
    parameter_shapes: list[str] = field(default_factory=list)
    instructions: Optional[int] = None
    module_name: str = ""
    hlo_path: str = ""
    group: int = -1
    closest: Optional[str] = None
    diff_summary: str = ""
    recompile: bool = False
    steps_ran: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A plain dict, keys as the field names."""
        return asdict(self)


@dataclass
class Step:
    """One step: what ran, whether it compiled, how long each part took, and why."""

    step: int
    compiled: bool
    graph_hash: Optional[str]
    #: None when the source does not say (artifacts read after the fact hold no per-step times).
    compile_ms: Optional[float]
    execute_ms: Optional[float]
    wall_ms: Optional[float]
    num_parameters: Optional[int]
    cause: str = ""
    diff_summary: Optional[str] = None
    graph_hashes: list[str] = field(default_factory=list)
    new_graphs: list[str] = field(default_factory=list)
    uncached: int = 0
    cached: int = 0
    live_report: str = ""
    #: Whether source lines were recorded while this step was traced (see ``RunConfig``).
    source_lines: Optional[bool] = None

    @property
    def new_graph(self) -> bool:
        """A program not seen earlier in this run was compiled in this step."""
        return bool(self.new_graphs)

    def to_json(self) -> dict[str, Any]:
        """Exactly the issue's step keys."""
        return {
            "step": self.step,
            "compiled": self.compiled,
            "graph_hash": self.graph_hash,
            "compile_ms": None if self.compile_ms is None else round(self.compile_ms, 3),
            "execute_ms": None if self.execute_ms is None else round(self.execute_ms, 3),
            "num_parameters": self.num_parameters,
            "cause": self.cause,
            "diff_summary": self.diff_summary,
        }


@dataclass
class XlaRun:
    """Everything one run produced; ``failure`` is None when every step ran."""

    label: str
    device: dict[str, Any]
    steps: list[Step] = field(default_factory=list)
    graphs: list[Graph] = field(default_factory=list)
    failure: Optional[Failure] = None
    out_dir: str = ""
    setup_ms: float = 0.0
    child_output: str = ""
    #: Parsed HLO per graph hash (explorer.xla.hlo.Module), for diffs on demand; not serialized.
    modules: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """The child ran every step and exited cleanly."""
        return self.failure is None

    def graph(self, graph_hash: str) -> Optional[Graph]:
        """The graph with this hash, or None."""
        return next((g for g in self.graphs if g.graph_hash == graph_hash), None)

    @property
    def recompiles(self) -> list[Step]:
        """Steps after the first that compiled a graph not seen before."""
        return [s for s in self.steps if s.new_graph and s.step > 0]

    def to_json(self) -> dict[str, Any]:
        """The CLI's document: exactly ``ok, device, steps, graphs, failure``."""
        return {
            "ok": self.ok,
            "device": self.device,
            "steps": [s.to_json() for s in self.steps],
            "graphs": [g.to_json() for g in self.graphs],
            "failure": self.failure.to_dict() if self.failure else None,
        }


#: Where the child asks torch_xla to write its debug log and HLO dumps, inside a run folder.
DEBUG_FILE, DUMP_DIR = "pt_xla_debug.txt", "hlo_dump"
#: ``XLA_SAVE_TENSORS_FILE`` (torch_xla appends the device ordinal) and the final metrics report.
SAVE_FILE, METRICS_FILE = "save_tensors.txt", "metrics_report.txt"
#: ``xla-run --out``'s own record of the run (its JSON), and where an earlier run's files go
#: when the folder is used again (never read as this run's).
RUN_FILE, PREVIOUS_DIR = "run.json", "previous"
#: What the run was asked to do, written before its child starts (the metrics report, when
#: captured, is the last file the child writes: a folder with the one and not the other was
#: left by a run that never reached its end).
CONFIG_FILE = "config.json"
#: The child's own messages (setup, begin, step, done), one JSON line each as they arrived: where
#: each step's records begin and end in the debug log, and how long it took. ``read`` of the
#: folder splits the log at them, as the run itself did, instead of guessing from the syncs.
MESSAGES_FILE = "messages.jsonl"


@dataclass
class ChildResult:
    """The raw material of a run: messages, the debug text, the dump folder, and any failure."""

    out_dir: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    failure: Optional[Failure] = None
    output: str = ""

    @property
    def debug_path(self) -> str:
        return os.path.join(self.out_dir, DEBUG_FILE)

    @property
    def dump_dir(self) -> str:
        return os.path.join(self.out_dir, DUMP_DIR)


__all__ = ["STEP_KEYS", "Graph", "Step", "Failure", "XlaRun", "ChildResult"]
