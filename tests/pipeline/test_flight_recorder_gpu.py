"""Flight Recorder dumps written by NCCL, read by the explorer as it reads gloo's.

On gloo (tests/pipeline/test_doctor_collectives.py) torch 2.9 records collectives only, each
"scheduled". NCCL records more: its entries move to "started" and "completed" as the GPU runs
them, name themselves ``nccl:all_reduce``, and hold the point-to-point calls (``is_p2p``, with a
sequence of their own). A reader written against gloo's dumps alone could misread all three; these
tests give it dumps the real NCCL wrote.

``gpu``: skipped only where torch sees no CUDA device; the 2-rank job needs two (NCCL refuses two
ranks on one GPU), and says how many it found.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.pipeline.analysis.collectives import align, diagnose_dumps, first_mismatch
from explorer.pipeline.traces.flight_recorder import read_dumps
from explorer.processes import free_port, rank_env

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

#: A rank reduces ``sys.argv[1]`` times (rank 1 once more where argv[2] says so), with a send and
#: a receive between its neighbours first, then dumps its own buffer (pickle and JSON). The
#: watchdog's own dump on a timeout goes to ``TORCH_FR_DUMP_TEMP_FILE``.
JOB = """
import datetime, os, sys, torch, torch.distributed as dist
import torch._C._distributed_c10d as c10d
extra = len(sys.argv) > 2 and sys.argv[2] == "extra"
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=20 if extra else 600))
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(rank % torch.cuda.device_count())
grad = torch.ones(4, device="cuda")
if world > 1:  # a point-to-point exchange before the collectives
    if rank == 0:
        dist.send(grad, 1)
    elif rank == 1:
        dist.recv(grad, 0)
for step in range(int(sys.argv[1]) + (extra and rank == 1)):
    dist.all_reduce(grad)
torch.cuda.synchronize()
out = os.environ["FR_OUT"]
with open(f"{out}/fr_{rank}", "wb") as f:
    f.write(c10d._dump_nccl_trace())
with open(f"{out}/json/fr_{rank}.json", "wb") as f:
    f.write(c10d._dump_nccl_trace_json())
dist.destroy_process_group()
"""


def _job(tmp_path: Path, world: int, *args: str) -> Path:
    script, out = tmp_path / "train.py", tmp_path / "dumps"
    script.write_text(JOB)
    (out / "json").mkdir(parents=True)
    port = free_port()
    env = {"TORCH_FR_BUFFER_SIZE": "64", "FR_OUT": str(out)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), *args],
            env={**rank_env(r, world, port, threads=1), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(world)
    ]
    try:
        logs = [p.communicate(timeout=300)[0].decode(errors="replace") for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0] * world, "\n".join(x[-2000:] for x in logs)
    return out


def test_an_nccl_dump_is_read_as_the_collectives_the_gpu_completed(tmp_path):
    """One rank on NCCL: three all_reduces, completed on the GPU, read from pickle and JSON alike,
    and no mismatch claimed of a job that had none."""
    out = _job(tmp_path, 1, "3")
    for folder in (out, out / "json"):
        dumps = read_dumps(folder)
        (dump,) = dumps.dumps.values()
        ops = [(e.op, e.seq) for e in dump.entries if not e.is_p2p]
        assert ops == [("all_reduce", 1), ("all_reduce", 2), ("all_reduce", 3)], ops
        # synchronised before the dump: the GPU finished every one, and the rank waits in none
        assert {e.state for e in dump.entries} == {"completed"}
        assert first_mismatch(dumps) is None
        verdict = diagnose_dumps(dumps)
        assert verdict.verdict == "no-wait"
        assert verdict.state(0).activity == "done", verdict.describe()
        assert sorted(align(dumps)["0"]) == [1, 2, 3]
    said = subprocess.run(
        [sys.executable, "-m", "explorer", "read", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert said.returncode == 0, said.stderr
    assert json.loads(said.stdout)["verdict"] == "no-wait"


@pytest.mark.gpus(2)
def test_nccl_dumps_with_point_to_point_calls_align_the_collectives_only(tmp_path):
    """Two ranks on NCCL: a send/receive (recorded, sequenced apart), then four all_reduces each;
    the P2P entries are read as such and never counted as a collective."""
    out = _job(tmp_path, 2, "4")
    dumps = read_dumps(out)
    for dump in dumps.dumps.values():
        p2p = [e for e in dump.entries if e.is_p2p]
        assert len(p2p) == 1 and p2p[0].op.startswith(("send", "recv")), p2p
    assert sorted(align(dumps)["0"]) == [1, 2, 3, 4]
    assert first_mismatch(dumps) is None
