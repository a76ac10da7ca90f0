"""What one real pipeline run is: a schedule, a model, a backend, and the knobs around them.

A :class:`RunSpec` is written as ``spec.json`` into the run folder and read back by every rank,
so spawned processes, ``torchrun`` workers on other machines and the collector after a failed
run all see exactly the same facts. It holds the schedule itself (its JSON form), never a
recipe to rebuild it, because the explorer may run a schedule the user edited by hand.

Pure python: no torch here, so the CLI can validate a spec before anything heavy is imported.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from explorer.errors import InputError
from explorer.pipeline.schedules import io as schedule_io
from explorer.pipeline.schedules.schedule import Schedule

BACKENDS = ("gloo", "nccl")
BUILTIN_MODELS = ("mlp", "transformer")
FAULTS = ("kill", "raise", "hang", "stop", "linger")


@dataclass(frozen=True)
class ModelSpec:
    """A model by name: ``mlp``, ``transformer`` or ``MODULE:FUNCTION`` on ``PYTHONPATH``.

    ``options`` go to the function as keywords (``width=64``); ``cuts`` are the layer indices
    where stages 1.. begin (default: layers split evenly by count).
    """

    name: str = "mlp"
    options: Mapping[str, Any] = field(default_factory=dict)
    cuts: Optional[tuple[int, ...]] = None

    def __post_init__(self) -> None:
        if self.name not in BUILTIN_MODELS and ":" not in self.name:
            raise InputError(
                f"--model {self.name!r}: use one of {', '.join(BUILTIN_MODELS)} "
                "or MODULE:FUNCTION naming a function that returns (layers, loss_fn, data_fn)"
            )


@dataclass(frozen=True)
class Fault:
    """A fault injected on purpose (tests, demos): at ``step`` of iteration 0, ``rank`` dies.

    ``kill`` sends the process SIGKILL (no chance to write anything), ``raise`` raises an
    exception inside the instruction loop, ``hang`` sleeps forever so the neighbours stall,
    ``stop`` sends the process SIGSTOP (as a user's Ctrl-Z or ``kill -STOP`` would: it stands
    frozen, and goes on where it was if continued), ``linger`` raises and then keeps the process
    alive (DeepSpeed's engine only).
    """

    rank: int
    step: int
    how: str = "kill"

    def __post_init__(self) -> None:
        if self.how not in FAULTS:
            raise InputError(f"fault {self.how!r}: choose one of {', '.join(FAULTS)}")


@dataclass(frozen=True)
class RunSpec:
    """Everything a rank needs to run its part (see the module docstring)."""

    schedule: Mapping[str, Any]  # explorer.schedule/1 JSON
    model: ModelSpec = ModelSpec()
    backend: str = "gloo"
    device: str = "cpu"  # "cpu" or "cuda" (per-rank GPU with NCCL, or one shared GPU with gloo)
    microbatch_size: int = 4
    iterations: int = 1
    seed: int = 0
    timing: bool = True
    #: Iterations run with timing off, interleaved with timed ones (instrumentation overhead).
    untimed_iterations: int = 0
    #: Seconds a rank may wait in one send/receive before the run counts as stalled.
    stall_timeout_s: float = 20.0
    fault: Optional[Fault] = None
    #: Threads per rank; 1 keeps ranks from fighting over the cores and keeps sums in one order.
    threads: int = 1
    #: This run's identity, repeated by every record the ranks write (set by the launcher).
    run_id: str = ""
    #: Which engine executes the schedule: "explorer" (ours) or "deepspeed" (DeepSpeed's own).
    engine: str = "explorer"
    #: ``MODULE:CLASS`` of a DeepSpeed-style schedule the deepspeed engine runs itself ("" = replay ``schedule``).
    schedule_class: str = ""
    #: False: messages between two ranks travel untagged on one channel per rank pair (as in
    #: Megatron-LM), so where next and previous rank coincide they pair first in, first out.
    p2p_tags: bool = True
    #: True: one receive buffer per direction, allocated once and reused (as DeepSpeed does).
    recv_pool: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise InputError(
                f"--backend {self.backend!r}: choose gloo (CPU, or a GPU shared by several ranks) or nccl (one GPU per rank)"
            )
        if self.device not in ("cpu", "cuda"):
            raise InputError(f"device {self.device!r}: choose cpu or cuda")
        if self.backend == "nccl" and self.device != "cuda":
            raise InputError(
                "--backend nccl moves tensors between GPUs: it needs device='cuda' (use gloo on CPU)"
            )
        for name in ("microbatch_size", "iterations", "threads"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.stall_timeout_s <= 0:
            raise InputError(f"stall_timeout_s must be positive, got {self.stall_timeout_s}")

    @staticmethod
    def for_schedule(schedule: Schedule, **options: Any) -> "RunSpec":
        """A spec holding ``schedule`` (as JSON) and ``options``."""
        return RunSpec(schedule=schedule_io.to_json(schedule), **options)

    def build_schedule(self) -> Schedule:
        return schedule_io.from_json(dict(self.schedule))

    @property
    def world_size(self) -> int:
        return max(self.schedule["stage_to_rank"]) + 1

    def to_json(self) -> dict:
        data = asdict(self)
        data["model"]["options"] = dict(self.model.options)
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "RunSpec":
        values = dict(data)
        model = dict(values.pop("model", {}))
        if model.get("cuts") is not None:
            model["cuts"] = tuple(model["cuts"])
        fault = values.pop("fault", None)
        return RunSpec(model=ModelSpec(**model), fault=Fault(**fault) if fault else None, **values)

    def write(self, folder: Path) -> Path:
        path = Path(folder) / "spec.json"
        path.write_text(json.dumps(self.to_json(), indent=1))
        return path

    @staticmethod
    def read(folder: Path) -> "RunSpec":
        """The folder's spec; in a rank the launcher started, only the spec of its own run
        (:data:`RUN_ID_VARIABLE`): a rank that read it late, after another run took the folder,
        once ran that run's schedule into that run's files."""
        path = Path(folder) / "spec.json"
        try:
            spec = RunSpec.from_json(json.loads(path.read_text()))
        except FileNotFoundError:
            raise InputError(
                f"{folder} holds no spec.json: is it a run folder written by `explorer run`?"
            ) from None
        mine = os.environ.get(RUN_ID_VARIABLE)
        if mine and spec.run_id != mine:
            raise InputError(
                f"{path} is run {spec.run_id}'s, not this rank's run {mine}: another run took "
                "the folder; this rank ends without writing there"
            )
        return spec


#: Set by the launcher in each rank's environment: the id of the run the rank belongs to.
RUN_ID_VARIABLE = "EXPLORER_RUN_ID"


def device_refusal(
    engine: str, backend: str, device: str, ranks_here: int, gpus: int
) -> Optional[str]:
    """Why ``engine`` cannot run ``ranks_here`` ranks on ``backend``/``device`` with ``gpus`` GPUs; None when it can.

    Decided before any process starts, from facts the launcher has: a combination that would
    fail minutes later inside a library (or, worse, run somewhere else than asked) is refused
    with the change that makes it work.
    """
    if device != "cuda":
        return None
    if engine in ("torch", "both", "all"):
        return (
            f"--engine {engine} runs PyTorch's pipelining on gloo/CPU only: "
            "use --engine explorer or deepspeed with --device cuda, or drop --device cuda"
        )
    if engine == "deepspeed" and backend == "gloo":
        return (
            "--engine deepspeed --backend gloo --device cuda: DeepSpeed hands CUDA tensors to "
            "gloo's send, which takes CPU tensors only; use --backend nccl (one GPU per rank) "
            "or --device cpu"
        )
    if gpus == 0:
        return "--device cuda: this machine has no CUDA device; use --backend gloo --device cpu"
    if backend == "nccl" and gpus < ranks_here:
        share = (
            "use --backend gloo --device cuda to share one GPU (transfers go through host memory)"
            if engine == "explorer"
            else "use fewer stages, or --device cpu"
        )
        return (
            f"--backend nccl needs one GPU per rank (NCCL refuses two ranks on one GPU): "
            f"{ranks_here} ranks here but {gpus} GPU(s); {share}"
        )
    return None


__all__ = [
    "BACKENDS",
    "BUILTIN_MODELS",
    "FAULTS",
    "ModelSpec",
    "Fault",
    "RunSpec",
    "device_refusal",
]
