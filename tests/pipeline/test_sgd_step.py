"""The engine's optimizer step (:class:`~explorer.pipeline.runtime.sgd.PlainSGD`) is
``torch.optim.SGD``'s, bit for bit, on the engine's own models: it replaced torch.optim only
because building an optimizer imports Dynamo in every rank."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # imports torch, and starts an interpreter

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["mlp", "transformer"])
def test_plain_sgd_steps_as_torch_optim_sgd_does(name):
    import torch

    from explorer.pipeline.runtime.models import ModelSpec, build_model
    from explorer.pipeline.runtime.sgd import PlainSGD

    def trained(make_optimizer) -> list:
        model = build_model(ModelSpec(name), 2, 4, seed=3)
        full = torch.nn.Sequential(*model.stages)
        opt = make_optimizer(full.parameters())
        for it in range(3):
            opt.zero_grad(set_to_none=True)
            for mb in range(4):
                x, y = model.data_fn(it * 4 + mb)
                (model.loss_fn(full(x), y) * 0.25).backward()
            opt.step()
        return [p.detach().clone() for p in full.parameters()]

    ours = trained(lambda params: PlainSGD(params, lr=0.1))
    theirs = trained(lambda params: torch.optim.SGD(params, lr=0.1))
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        assert a.numpy().tobytes() == b.numpy().tobytes()  # every bit, -0.0 included


#: What a rank does before its first instruction: build its model, its stages and their step.
_RANK_SETUP = """
import sys
from explorer.pipeline.runtime.models import ModelSpec, build_model
from explorer.pipeline.runtime.stage_state import StageState
from explorer.pipeline.runtime.reference import train_reference
model = build_model(ModelSpec("mlp"), 2, 4, seed=0)
state = StageState(0, model.stages[0], 2, first=True, last=False, loss_fn=model.loss_fn,
                   num_microbatches=4)
state.optimizer_step()
train_reference(build_model(ModelSpec("mlp"), 2, 4, seed=0), 1, 2)
print("torch._dynamo" in sys.modules)
"""


def test_a_rank_builds_its_stages_and_steps_without_importing_dynamo():
    """What the change is for: torch.optim's constructor imported Dynamo (1.2-1.5 s of CPU) in
    every rank; a rank's set-up and the reference now never do. In a fresh interpreter."""
    said = subprocess.run(
        [sys.executable, "-c", _RANK_SETUP], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert said.returncode == 0, said.stderr[-2000:]
    assert said.stdout.strip() == "False"
