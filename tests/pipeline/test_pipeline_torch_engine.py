"""PyTorch's own engine on the same runs as ours: real gloo, real _PipelineScheduleRuntime, real profiler."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from explorer.pipeline.analysis import build
from explorer.pipeline.runtime import RunSpec
from explorer.pipeline.runtime.torch_orders import choose_order, explorer_order, order_problem
from explorer.pipeline.schedules.instructions import Kind


def test_pytorch_1f1b_order_is_replaced_by_ours_and_says_why():
    """torch 2.9's Schedule1F1B order skips the last rank's F0; auto must notice, not run it."""
    schedule = build("1f1b", 2, 4)
    choice = choose_order(schedule)
    assert choice.source == "explorer" and choice.torch_schedule == "Schedule1F1B"
    assert choice.actions == explorer_order(schedule)
    assert (
        "stage 1 micro-batch 0: F missing" in choice.problem and "1F4 is outside" in choice.problem
    )
    strict = choose_order(schedule, "torch")
    assert strict.actions is None and strict.problem.startswith("PyTorch ")


@pytest.mark.parametrize(
    "kind,stages,chunks,cls",
    [("gpipe", 2, 1, "ScheduleGPipe"), ("interleaved-1f1b", 2, 2, "ScheduleInterleaved1F1B")],
)
def test_whole_pytorch_orders_are_run_as_they_are(kind, stages, chunks, cls):
    schedule = build(kind, stages, 4, chunks=chunks)
    choice = choose_order(schedule)
    assert (choice.source, choice.torch_schedule, choice.problem) == ("torch", cls, None)
    assert order_problem(choice.actions, schedule.num_stages, 4, schedule.stage_to_rank) is None


def test_order_problem_names_what_is_wrong():
    assert (
        order_problem({0: ["0F0", "0B0", "0B0"]}, 1, 1, (0,))
        == "stage 0 micro-batch 0: B (or I+W) 2 times"
    )
    assert "1F0 computes stage 1, which rank 1 holds" in order_problem(
        {0: ["1F0"], 1: []}, 2, 1, (0, 1)
    )


@pytest.mark.slow
def test_both_engines_side_by_side_on_1f1b(tmp_path):
    from explorer.pipeline.runtime.engines import compare_engines

    spec = RunSpec.for_schedule(build("1f1b", 2, 4), iterations=2)
    both = compare_engines(spec, tmp_path)
    ours, theirs = both.explorer, both.torch
    assert ours.ok and theirs.ok, (ours.failure, theirs.failure)
    # M = 4: PyTorch's divide-after-sum equals our scale-before-backward to the bit.
    assert theirs.bitwise_equal_to_reference is True and both.losses_bitwise_equal is True
    assert theirs.losses == ours.losses and theirs.grad_scale_to_reference == 1.0
    # The profiled iteration holds every action of the order exactly once, plus PyTorch's own comms.
    last = theirs.trace()
    assert set(last.iteration.tolist()) == {1}
    codes = [Kind(k).code for k in last.kind.tolist()]
    ran = Counter(
        (r, a) for r, a, c in zip(last.rank.tolist(), last.action, codes) if c in ("F", "B")
    )
    assert ran == Counter((rank, a) for rank, acts in theirs.order.actions.items() for a in acts)
    assert Counter(c for c in codes if c not in ("F", "B")) == {
        "SA": 4,
        "RA": 4,
        "SG": 4,
        "RG": 4,
    }
    rows = {r["kind"]: r for r in both.kind_times()}
    assert rows["F"]["explorer_n"] == rows["F"]["torch_n"] == 8 and rows["B"]["torch_mean_ms"] > 0
    assert 0 <= rows["F"]["torch_wait_mean_ms"] <= rows["F"]["torch_mean_ms"]
    spans = both.makespans_ms()
    busy = {rank: float((last.end - last.start)[last.rank == rank].sum()) * 1e3 for rank in (0, 1)}
    assert spans["explorer"] > 0 and spans["torch"] >= max(busy.values())
    assert "makespan: explorer" in both.table()


@pytest.mark.slow
def test_non_power_of_two_microbatches_agree_within_tolerance_not_bitwise(tmp_path):
    from explorer.pipeline.runtime.torch_engine import run_torch_engine

    result = run_torch_engine(RunSpec.for_schedule(build("gpipe", 2, 3)), tmp_path)
    assert result.ok, (result.failure, result.folder)
    assert result.order.torch_schedule == "ScheduleGPipe"
    assert result.bitwise_equal_to_reference is False and result.within_tolerance is True
    assert 0 < result.max_abs_diff_to_reference < 1e-5


@pytest.mark.slow
def test_cli_engine_torch_keeps_the_contract_and_reports_unsupported_orders(tmp_path, capsys):
    from explorer.cli import main

    code = main(
        [
            "run",
            "--kind",
            "interleaved-1f1b",
            "--stages",
            "2",
            "--chunks",
            "2",
            "--microbatches",
            "4",
            "--engine",
            "torch",
            "--out",
            str(tmp_path),
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] and doc["engine"] == "torch"
    assert {"losses", "bitwise_equal_to_reference", "failure", "instructions"} <= set(doc)
    assert (
        doc["torch_engine"]["torch_schedule"] == "ScheduleInterleaved1F1B"
        and len(doc["losses"]) == 4
    )
    assert {i["stage"] for i in doc["instructions"]} == {0, 1, 2, 3}
    assert sorted(p.name for p in tmp_path.glob("torch_rank*.json")) == [
        "torch_rank0.json",
        "torch_rank1.json",
    ]

    code = main(
        [
            "run",
            "--kind",
            "1f1b",
            "--stages",
            "2",
            "--microbatches",
            "4",
            "--engine",
            "torch",
            "--torch-order",
            "torch",
            "--json",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert (
        code == 1 and doc["torch_engine"]["status"] == "unsupported" and doc["instructions"] == []
    )
    assert "Schedule1F1B.pipeline_order is not one whole step" in doc["failure"]["message"]


def _torch_run(actions: dict[int, list[str]], scale: float, within: bool):
    from explorer.pipeline.runtime.torch_engine import TorchRunResult
    from explorer.pipeline.runtime.torch_orders import OrderChoice

    return TorchRunResult(
        "ran",
        OrderChoice(actions, "explorer", None),
        within_tolerance=within,
        grad_scale_to_reference=scale,
        torch_version="2.9.0",
    )


SPLIT = {
    0: ["0F0", "0F1", "0I0", "0W0", "0I1", "0W1"],
    1: ["1F0", "1I0", "1W0", "1F1", "1I1", "1W1"],
}
FULL = {0: ["0F0", "0F1", "0B0", "0B1"], 1: ["1F0", "1B0", "1F1", "1B1"]}


@pytest.mark.parametrize(
    "actions, scale, within, said",
    [
        (SPLIT, 2.0, False, "pytorch/pytorch#164777"),
        (FULL, 2.0, False, "summed over the 2 micro-batches, never divided"),
        (SPLIT, 1.0, False, None),  # off for another reason: no cause claimed
        (SPLIT, 2.0, True, None),  # within tolerance: nothing to explain
        (SPLIT, 1.7, False, None),
    ],
)
def test_a_cross_check_off_by_the_microbatch_count_says_why(actions, scale, within, said):
    from explorer.pipeline.analysis.engines import torch_off_by_microbatches

    why = torch_off_by_microbatches(_torch_run(actions, scale, within))
    if said is None:
        assert why is None
    else:
        assert why is not None and said in why
        assert ("#164777" in why) == (actions is SPLIT)


@pytest.mark.slow
def test_zb_h1_on_pytorchs_runtime_fails_the_cross_check_with_pytorchs_bug_named(tmp_path):
    """torch 2.9.0's ``_PipelineScheduleRuntime`` leaves a split backward's gradients unscaled:
    the cross-check must say no (exit 1) and say why, not blame the schedule (which runs
    bitwise equal on the explorer's engine)."""
    from explorer.pipeline.analysis.engines import torch_off_by_microbatches, torch_passed
    from explorer.pipeline.runtime.torch_engine import run_torch_engine

    result = run_torch_engine(RunSpec.for_schedule(build("zb-h1", 2, 4)), tmp_path)
    assert result.ok, result.failure
    if result.within_tolerance:  # a torch with the upstream fix
        assert torch_off_by_microbatches(result) is None and torch_passed(result)
    else:
        assert result.grad_scale_to_reference == pytest.approx(4.0, rel=1e-3)
        why = torch_off_by_microbatches(result)
        assert why and "BACKWARD_WEIGHT" in why and not torch_passed(result)
    _every_reader_gives_the_runs_verdict(tmp_path, torch_passed(result))


def _every_reader_gives_the_runs_verdict(folder, passed: bool) -> None:
    """``read`` and ``check`` of the folder exit as ``--engine torch`` did, ``ok`` alike: their
    traces and messages were clean, and only torch_result.json says the gradients were wrong."""
    from cli_in_process import call_cli

    for command in ("read", "check"):
        said = call_cli([command, str(folder), "--json"])
        doc = json.loads(said.stdout)
        assert (said.returncode, doc["ok"]) == (0 if passed else 1, passed), (command, doc)
        shown = call_cli([command, str(folder)])
        assert shown.returncode == said.returncode
        assert passed or "not within tolerance of the reference" in shown.stdout, shown.stdout
    (folder / "torch_result.json").unlink()  # a run that never finished writes none
    unfinished = json.loads(call_cli(["check", str(folder), "--json"]).stdout)
    assert unfinished["ok"] is False and unfinished["failure"]["kind"] == "unfinished"
    collect = call_cli(["run", "--collect", str(folder)])
    assert collect.returncode == 2 and "explorer read" in collect.stderr, collect.stderr
