"""One rank of PyTorch's own pipeline engine, on the same model, split and micro-batches as ours.

The launcher (:mod:`.torch_engine`) writes ``spec.json`` (the :class:`RunSpec`: model, seed,
micro-batch size, iterations) and ``actions.json`` (rank -> compute-only order, ``2F0`` text)
into the folder; every rank builds the whole model from the same seed (as :mod:`.worker`
does), wraps its stages in ``PipelineStage`` and hands the order to ``_PipelineScheduleRuntime``,
which adds its own sends and receives and wraps every action in ``record_function("PP:...")``.
Iterations after the first (warm-up, shape inference) run under ``torch.profiler`` with an
``explorer:iteration N`` annotation around each; the Chrome trace goes to ``torch_rank<R>.json``.

Training matches the explorer's engine: SGD with lr 0.1 per stage, gradients set to None
before each iteration, ``loss_fn`` averaged over micro-batches. PyTorch averages by dividing
the summed gradients by M after the last backward (``scale_grads``) where we scale each loss
by 1/M first; see :mod:`.torch_engine` for what that does to bitwise equality.

Every send and receive the runtime posts is written as a ``message`` line of
``torch_rank<R>.jsonl`` with its tensor tuple (:mod:`.torch_messages`), and rank 0 writes the
runtime's compute+comms order to ``torch_order.json``, so ``explorer read`` checks the P2P
contract of the folder as it does the explorer's own.

Rank 0 gathers losses and gradients, trains the reference and writes ``torch_result.json``
(:mod:`.result_writer`, the same writer as explorer's engine); a rank that fails writes its
:class:`~explorer.failure.Failure` as a ``failure`` line of ``torch_rank<R>.jsonl``
(the same line explorer's ranks write) and exits 1 at once.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path

from explorer.processes.orphan import end_with_launcher

end_with_launcher()  # first: a rank whose launcher is gone must not run on into its folder

# Everything a rank imports is imported here, not in ``main``: on CPU the ranks fork from one
# template that imported this module (:mod:`explorer.processes.template`), so each import is
# paid once per run, not once per rank. Dynamo is among them because ``torch.optim``'s
# optimizers import it when they are built (torch 2.9): about 1 s of CPU in every rank.
import torch
import torch._dynamo  # noqa: F401
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import _Action, _PipelineScheduleRuntime
from torch.distributed.pipelining.stage import _PipelineStageBase
from torch.profiler import ProfilerActivity, profile, record_function

from explorer.failure import FailureKind, from_exception
from explorer.pipeline.analysis.contract import message_steps
from explorer.pipeline.runtime.determinism import prepare_rank
from explorer.pipeline.runtime.models import build_model
from explorer.pipeline.runtime.recorder import Recorder
from explorer.pipeline.runtime.result_writer import write_result
from explorer.pipeline.runtime.spec import RunSpec
from explorer.pipeline.runtime.torch_messages import Messages
from explorer.pipeline.schedules.torch_actions import format_action, to_action
from explorer.pipeline.schedules.torch_csv import ORDER_FILE, runtime_schedule

#: A rank's report file is ``torch_rank<R>.jsonl`` (its profiler trace is ``torch_rank<R>.json``).
REPORT_PREFIX = "torch_rank"


def main(folder: Path) -> int:
    rank = int(os.environ["RANK"])
    try:
        return _run(rank, int(os.environ["WORLD_SIZE"]), folder)
    except BaseException as exc:
        recorder = Recorder(folder, rank, _run_id(folder), prefix=REPORT_PREFIX)
        recorder.failure(from_exception(exc, FailureKind.ERROR))
        recorder.close()
        sys.stdout.flush()
        os._exit(1)


def _run_id(folder: Path) -> str:
    """The run's id for the failure line ('' when even the spec cannot be read)."""
    try:
        return RunSpec.read(folder).run_id
    except Exception:
        return ""


def _run(rank: int, world: int, folder: Path) -> int:
    spec = RunSpec.read(folder)
    actions = {
        int(r): [_Action.from_str(a) for a in acts]
        for r, acts in json.loads((folder / "actions.json").read_text()).items()
    }
    prepare_rank("gloo", "cpu", spec.threads)  # PyTorch's pipelining runs here on gloo/CPU
    stage_to_rank = spec.schedule["stage_to_rank"]
    num_stages, m = len(stage_to_rank), spec.schedule["num_microbatches"]
    dist.init_process_group(
        "gloo",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=spec.stall_timeout_s),
    )
    model = build_model(spec.model, num_stages, spec.microbatch_size, spec.seed)
    mine = [s for s, r in enumerate(stage_to_rank) if r == rank]
    stages: list[_PipelineStageBase] = [
        PipelineStage(model.stages[s], s, num_stages, torch.device("cpu")) for s in mine
    ]
    for stage in stages:
        _skip_neighbour_handshake(stage)
    runtime = _PipelineScheduleRuntime(stages, m, loss_fn=model.loss_fn, scale_grads=True)
    runtime.pipeline_order = actions
    runtime._prepare_schedule_with_comms(actions)
    messages = _watch_messages(folder, rank, spec.run_id, runtime, stages)
    optimizers = [torch.optim.SGD(model.stages[s].parameters(), lr=0.1) for s in mine]
    losses: list[list[torch.Tensor]] = []
    prof, started = profile(activities=[ProfilerActivity.CPU]), False
    for it in range(spec.iterations):
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        pairs = [model.data_fn(it * m + mb) for mb in range(m)]
        batch, target = torch.cat([x for x, _ in pairs]), torch.cat([y for _, y in pairs])
        profiled = it > 0 or spec.iterations == 1
        if profiled and not started:
            prof.start()
            started = True
        dist.barrier()
        row: list[torch.Tensor] = []
        messages.iteration = it
        with record_function(f"explorer:iteration {it}") if profiled else nullcontext():
            runtime.step(batch, target=target, losses=row)
        for opt in optimizers:
            opt.step()
        losses.append([x.detach().clone() for x in row])
    prof.stop()
    prof.export_chrome_trace(str(folder / f"torch_rank{rank}.json"))
    grads = {s: [_grad(p) for p in model.stages[s].parameters()] for s in mine}
    gathered: list | None = [None] * world if rank == 0 else None
    dist.gather_object(
        {"losses": losses if num_stages - 1 in mine else [], "grads": grads}, gathered, dst=0
    )
    if gathered is not None:  # rank 0, where the gather lands
        write_result(folder / "torch_result.json", spec, num_stages, m, gathered, spec.iterations)
    messages.recorder.close()
    dist.destroy_process_group()
    return 0


def _watch_messages(folder: Path, rank: int, run_id: str, runtime, stages) -> Messages:
    """Every exchange's tensors on a ``message`` line (:mod:`.torch_messages`), placed by the
    order the runtime executes, which rank 0 writes to ``torch_order.json`` for the reader."""
    order = {
        r: [format_action(a) for a in (to_action(x) for x in acts) if a is not None]
        for r, acts in runtime.pipeline_order_with_comms.items()
    }
    if rank == 0:
        (folder / ORDER_FILE).write_text(json.dumps({str(r): a for r, a in order.items()}))
    steps = message_steps(runtime_schedule(order), rank)
    messages = Messages(Recorder(folder, rank, run_id, prefix=REPORT_PREFIX), steps)
    for stage in stages:
        messages.watch(stage)
    return messages


def _skip_neighbour_handshake(stage) -> None:
    """See :data:`.torch_engine.WORKAROUND`; per instance, so nothing else in the process changes."""
    stage._get_init_p2p_neighbors_ops = lambda: []


def _grad(p: torch.Tensor) -> torch.Tensor:
    return p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

__all__ = ["REPORT_PREFIX", "main"]
