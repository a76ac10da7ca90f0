"""The seed's listing (DeepSpeed issue #2800) and its hazard, reproduced exactly.

The seed printed ``FixBufferTrainSchedule(8, 4, 2)``: DeepSpeed 0.8's TrainSchedule with only
the ``+1`` removed from ``num_pipe_buffers`` (so stage 2 of 4 gets 2 buffers, with the legacy
send/recv order) and marked step 6 ``# WRONG!``. DeepSpeed 0.8.1's real class writes the
listing in the test; the thread's copy (``golden/seed_001_fixbuffer_stage2.txt``) is kept as
the check that it is the listing the seed posted, and for the step it marked wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deepspeed_081 import import_schedule_081, without_plus_one

from explorer.pipeline.analysis import build, check
from explorer.pipeline.printout.listing import MARK, rank_listing

GOLDEN = Path(__file__).parent.parent / "golden"


@pytest.fixture(scope="module")
def real_seed_lines(tmp_path_factory) -> list[str]:
    """``pprint(list(FixBufferTrainSchedule(8, 4, 2)))``'s steps, written by 0.8.1's real class.

    Each step as the seed printed it: the step's micro-batch id, then its instructions.
    """
    schedule = import_schedule_081(tmp_path_factory.mktemp("ds081"))
    seed = without_plus_one(schedule.TrainSchedule)(8, 4, 2)
    return [
        "[" + ", ".join([str(seed._step_to_micro_batch(i)[0]), *map(repr, cmds)]) + "]"
        for i, cmds in enumerate(seed.steps())
    ]


def seed_lines() -> tuple[list[str], int]:
    """The seed's 22 step lines as ``[...]`` and the index of the line marked ``# WRONG!``."""
    raw = [
        line
        for line in (GOLDEN / "seed_001_fixbuffer_stage2.txt").read_text().splitlines()
        if not line.startswith("#")
    ]
    lines, wrong = [], None
    for i, line in enumerate(raw):
        body, _, comment = line.partition("  #")
        if "WRONG" in comment:
            wrong = i
        body = (
            body.strip()
            .removeprefix("[[")
            .removeprefix("[")
            .removesuffix("]]")
            .removesuffix("],")
            .removesuffix("]")
        )
        lines.append(f"[{body}]")
    assert wrong is not None
    return lines, wrong


def test_the_seed_thread_posted_what_deepspeed_081_writes(real_seed_lines):
    posted, _ = seed_lines()
    assert len(real_seed_lines) == 22 and posted == real_seed_lines


def test_seed_listing_and_hazard_reproduced_exactly(real_seed_lines):
    report = check(build("deepspeed-train", 4, 8, buffers="fixed", order="legacy"))
    ours = rank_listing(report, 2)[1:]
    _, wrong = seed_lines()
    assert [line.split(MARK)[0] for line in ours] == real_seed_lines
    marked = [i for i, line in enumerate(ours) if MARK in line]
    assert marked[0] == wrong == 6
    first = [h for h in report.findings.hazards if h.stage == 2][0]
    d = first.to_dict()
    assert (d["stage"], d["step"], d["instruction"], d["buffer"]) == (
        2,
        6,
        "SendGrad(buffer_id=0)",
        0,
    )
    assert (d["expected_microbatch"], d["found_microbatch"]) == (0, 2)
    assert d["overwritten_by"] == {
        "step": 6,
        "instruction": "RecvActivation(buffer_id=0)",
        "stage": 2,
    }


def test_legacy_and_fixed_deepspeed_are_clean_and_need_what_they_allocate():
    legacy = check(build("deepspeed-train", 4, 8, buffers="legacy", order="legacy"))
    fixed = check(build("deepspeed-train", 4, 8, buffers="fixed", order="fixed"))
    assert legacy.ok and fixed.ok
    # The +1 was exactly what the legacy order needed; the fixed order needs one buffer fewer.
    assert legacy.buffers.needed == (4, 4, 3, 2) and legacy.buffers.allocated == (5, 4, 3, 2)
    assert fixed.buffers.needed == (4, 3, 2, 1) and fixed.buffers.allocated == (4, 3, 2, 2)


def test_cli_listing_matches_committed_golden(explorer_cli):
    out = explorer_cli(
        "schedule",
        "--kind",
        "deepspeed-train",
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--buffers",
        "fixed",
        "--order",
        "legacy",
        "--stage",
        "2",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == (GOLDEN / "cli_seed_stage2.txt").read_text()
