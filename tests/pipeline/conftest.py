"""Real pipeline runs shared by the pipeline tests (each launch costs a few seconds of process start-up)."""

from __future__ import annotations

import pytest
from built_once import built_once

from explorer.pipeline.analysis import build
from explorer.pipeline.runtime import RunSpec, run_pipeline

#: (name, kind, buffers, order): DeepSpeed 0.8 (legacy), today's DeepSpeed (fixed), and PyTorch-style 1F1B.
CORRECT = (
    ("legacy", "deepspeed-train", "legacy", "legacy"),
    ("fixed", "deepspeed-train", "fixed", "fixed"),
    ("1f1b", "1f1b", None, None),
)


@pytest.fixture(scope="session")
def correct_runs(tmp_path_factory):
    """{(stages, name): (schedule, result)} for 2 and 4 stages, 8 micro-batches, the MLP on gloo."""

    def launch_all():
        runs = {}
        for stages in (2, 4):
            for name, kind, buffers, order in CORRECT:
                schedule = build(kind, stages, 8, buffers=buffers, order=order)
                folder = tmp_path_factory.mktemp(f"run-{stages}-{name}")
                runs[stages, name] = schedule, run_pipeline(RunSpec.for_schedule(schedule), folder)
        return runs

    return built_once(tmp_path_factory, "pipeline-correct-runs", launch_all)


@pytest.fixture(scope="session")
def seed_bug_run(tmp_path_factory):
    """The seed's schedule: DeepSpeed's buffers without the +1, with the old send/recv order."""
    schedule = build("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    return built_once(
        tmp_path_factory,
        "pipeline-seed-bug-run",
        lambda: (
            schedule,
            run_pipeline(RunSpec.for_schedule(schedule), tmp_path_factory.mktemp("seed-bug")),
        ),
    )


@pytest.fixture(scope="session")
def swap_run(tmp_path_factory):
    """The same-peer swap at pipeline size 2, untagged (``test_pipeline_contract.eager_backward``):
    one real run for every test that reads it. Its folder is read-only: copy it to change it."""

    def launch():
        from test_pipeline_contract import eager_backward

        spec = RunSpec.for_schedule(eager_backward(), p2p_tags=False)
        return run_pipeline(spec, tmp_path_factory.mktemp("swap") / "untagged", timeout_s=120)

    return built_once(tmp_path_factory, "pipeline-swap-untagged", launch)


def alive(pid: int) -> bool:
    """True when a process with ``pid`` still exists (zombies of our own children included)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def gist(verdict) -> tuple:
    """What a hang verdict says, apart from when and how it was read (live or saved): the kind,
    the ranks it names, and each rank's activity, call, peer, engine, place and words."""
    ranks = tuple(
        (s.rank, s.activity, s.op, s.peer, s.engine, s.note, s.where, s.at, s.microbatch)
        for s in verdict.ranks
    )
    return verdict.verdict, verdict.culprit, verdict.waiting, verdict.cycle, ranks


def read_again_from_the_folder(saved, verdict) -> None:
    """The stacks ``doctor(..., save=saved)`` wrote give ``verdict`` again, read from the folder
    alone: no process is read, so it is what a person gets after the job is gone."""
    from explorer.pipeline.runtime.doctor import doctor

    again = doctor([], saved)
    assert again.source == "stacks" and again.live == 0, again
    assert gist(again.verdict) == gist(verdict), (gist(again.verdict), gist(verdict))
