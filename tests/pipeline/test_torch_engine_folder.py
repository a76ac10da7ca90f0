"""One run per folder on PyTorch's engine too: a reused ``--out`` never mixes two runs.

The explorer's engine set an earlier run's files aside under ``previous/<run id>/``, but
PyTorch's engine (``--engine torch``) took no claim on its folder: a second torch run appended
its lines to the first's ``torch_rank<R>.jsonl`` (and was refused as "edited"), a 3-rank run's
``torch_rank2.*`` stayed beside a 2-rank run's and was read as a replica, and ``check`` of an
explorer run written over a torch run judged the torch run's messages (exit 0) while ``read``
of the same folder named the new run's failure. Real runs of both engines into one folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_in_process import call_cli

from explorer.pipeline.analysis import build
from explorer.pipeline.runtime import RunSpec, run_pipeline
from explorer.pipeline.runtime.torch_engine import run_torch_engine

pytestmark = pytest.mark.slow


def _previous(folder: Path) -> list[set[str]]:
    return [{p.name for p in run.iterdir()} for run in sorted((folder / "previous").iterdir())]


def test_each_run_into_a_reused_folder_sets_the_one_before_aside(tmp_path):
    folder = tmp_path / "out"
    first = run_torch_engine(RunSpec.for_schedule(build("1f1b", 3, 3)), folder)
    assert first.status == "ran", first.failure
    assert (folder / "torch_rank2.jsonl").exists()

    # the explorer's engine over it: the torch run's files go aside, all of them
    wrong = RunSpec.for_schedule(build("deepspeed-train", 2, 3, buffers=1))
    assert not run_pipeline(wrong, folder, check_first=False).ok
    assert not list(folder.glob("torch_*")) and not (folder / "actions.json").exists()
    assert {"torch_rank2.jsonl", "torch_order.json", "actions.json"} <= _previous(folder)[0]
    said = {k: call_cli([k, str(folder)]) for k in ("read", "check")}
    assert {k: c.returncode for k, c in said.items()} == {"read": 1, "check": 1}, said
    assert "PyTorch" not in said["check"].stdout, said["check"].stdout

    # PyTorch's engine again, on 2 ranks: the explorer run goes aside, no third rank is left
    second = run_torch_engine(RunSpec.for_schedule(build("gpipe", 2, 2)), folder)
    assert second.status == "ran" and second.bitwise_equal_to_reference, second.failure
    assert not (folder / "torch_rank2.jsonl").exists() and not list(folder.glob("rank*.jsonl"))
    assert len(_previous(folder)) == 2
    said = {k: call_cli([k, str(folder)]) for k in ("read", "check")}
    assert {k: c.returncode for k, c in said.items()} == {"read": 0, "check": 0}, said
    assert "profiler traces of 2 rank(s)" in said["read"].stdout, said["read"].stdout
    doctor = call_cli(["doctor", str(folder)])  # no explorer run whose ranks never wrote
    assert doctor.returncode == 2 and "no rank of the run wrote" not in doctor.stderr, doctor.stderr
