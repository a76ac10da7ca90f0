"""The CLI contract: formats, JSON keys, exit codes (0 valid, 1 findings, 2 bad input).

Each test takes ``explorer_cli`` and so runs twice: ``main()`` in-process (fast tier) and
``python -m explorer.cli`` in a child (slow tier). ``--from`` loads the user's class in a child
process of its own, so those cases are slow in both forms.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from cli_in_process import run_cli_child

from explorer.pipeline.schedules import io

SEED = [
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
]


def test_check_json_contract_for_the_seed_case(explorer_cli):
    res = explorer_cli("check", *SEED, "--json")
    assert res.returncode == 1
    out = json.loads(res.stdout)
    assert out["ok"] is False and out["deadlock"] is None and out["unmatched"] == []
    h = next(h for h in out["hazards"] if h["stage"] == 2)
    assert {
        k: h[k]
        for k in (
            "stage",
            "step",
            "instruction",
            "buffer",
            "expected_microbatch",
            "found_microbatch",
        )
    } == {
        "stage": 2,
        "step": 6,
        "instruction": "SendGrad(buffer_id=0)",
        "buffer": 0,
        "expected_microbatch": 0,
        "found_microbatch": 2,
    }
    assert (
        h["overwritten_by"]["instruction"] == "RecvActivation(buffer_id=0)"
        and h["overwritten_by"]["step"] == 6
    )
    assert out["buffers"] == {"allocated": [4, 3, 2, 2], "needed": [4, 4, 3, 2]}
    assert set(out["bubble"]) >= {"fraction_of_total", "fraction_of_ideal", "makespan"}


def test_check_exits_0_for_a_valid_schedule_and_reports_the_bubble(explorer_cli):
    res = explorer_cli(
        "check",
        "--kind",
        "1f1b",
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--costs",
        "F=1,B=1",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["ok"] and out["bubble"]["fraction_of_total"] == pytest.approx(3 / 11)


@pytest.mark.parametrize(
    "args,needle",
    [
        (
            ["--kind", "1f1b", "--stages", "0", "--microbatches", "8"],
            "stages must be a positive integer",
        ),
        (
            ["--kind", "1f1b", "--stages", "-3", "--microbatches", "8"],
            "stages must be a positive integer",
        ),
        (
            ["--kind", "interleaved-1f1b", "--stages", "4", "--microbatches", "6", "--chunks", "2"],
            "multiple of stages",
        ),
        (
            ["--kind", "gpipe", "--stages", "4", "--microbatches", "8", "--chunks", "2"],
            "applies only to interleaved-1f1b",
        ),
        (
            ["--kind", "gpipe", "--stages", "4", "--microbatches", "8", "--buffers", "legacy"],
            "applies only to deepspeed-train",
        ),
        (
            ["--kind", "gpipe", "--stages", "4", "--microbatches", "8", "--buffers", "zero"],
            "--buffers 'zero'",
        ),
        (
            ["--kind", "gpipe", "--stages", "4", "--microbatches", "8", "--costs", "F=-1"],
            "non-negative",
        ),
        (
            ["--kind", "gpipe", "--stages", "4", "--microbatches", "8", "--stage", "9"],
            "outside stages 0..3",
        ),
        pytest.param(
            ["--from", "json:dumps", "--stages", "4", "--microbatches", "8"],
            "is not a pipeline schedule class",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            ["--from", "no_such_module:X", "--stages", "4", "--microbatches", "8"],
            "cannot import module",
            marks=pytest.mark.slow,
        ),
        (["--stages", "4", "--microbatches", "8"], "--kind is required"),
        (
            ["--kind", "dualpipev", "--stages", "4", "--microbatches", "6"],
            "needs at least that many micro-batches",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(explorer_cli, args, needle):
    res = explorer_cli("check", *args)
    assert res.returncode == 2
    assert needle in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_unknown_kind_is_rejected_by_the_parser_with_exit_2(explorer_cli):
    res = explorer_cli("check", "--kind", "pipedream", "--stages", "4", "--microbatches", "8")
    assert res.returncode == 2 and "invalid choice" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_from_class_on_pythonpath(tmp_path):
    (tmp_path / "my_schedules.py").write_text(
        textwrap.dedent("""
        class ForwardPass:
            def __init__(self, buffer_id): self.buffer_id = buffer_id
        class BackwardPass(ForwardPass): pass
        class LoadMicroBatch(ForwardPass): pass
        class OneStage:
            '''Data parallel with accumulation: the DataParallelSchedule example of DeepSpeed's docs.'''
            def __init__(self, micro_batches, stages, stage_id):
                self.micro_batches = micro_batches
            def steps(self):
                for _ in range(self.micro_batches):
                    yield [LoadMicroBatch(0), ForwardPass(0), BackwardPass(0)]
            def num_pipe_buffers(self):
                return 1
    """)
    )
    res = run_cli_child(
        [
            "check",
            "--from",
            "my_schedules:OneStage",
            "--stages",
            "1",
            "--microbatches",
            "3",
            "--json",
        ],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["buffers"] == {"allocated": [1], "needed": [1]}


@pytest.mark.parametrize(
    "fmt,reader", [("json", lambda t: io.from_json(json.loads(t))), ("csv", io.from_csv)]
)
def test_schedule_exports_read_back(explorer_cli, fmt, reader):
    from explorer.pipeline.analysis import build

    res = explorer_cli(
        "schedule", "--kind", "zb-h1", "--stages", "3", "--microbatches", "5", "--format", fmt
    )
    assert res.returncode == 0, res.stderr
    assert reader(res.stdout).same_instructions(build("zb-h1", 3, 5))


def test_html_page_is_self_contained_and_marks_the_hazard(explorer_cli, tmp_path):
    out = tmp_path / "seed.html"
    res = explorer_cli("schedule", *SEED, "--format", "html", "--out", str(out))
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    _assert_offline_with_figures(page)
    assert page.count("class='bad'") == 11
    assert "stage 2 step 6: SendGrad(buffer_id=0)" in page


def _assert_offline_with_figures(page: str) -> None:
    """Nothing loaded from elsewhere; plotly.js inlined once; one div per figure, filled."""
    import re

    assert not re.search(r"<script[^>]*\bsrc=", page) and not re.search(r"<link[^>]*href=", page)
    markup = re.sub(
        r"<script[^>]*>.*?</script>", "", page, flags=re.S
    )  # plotly.js's own strings aside
    assert not re.search(r"""(src|href)=["']?https?://""", markup)
    assert len(re.findall(r"\* plotly\.js v\d", page)) == 1
    assert page.count('class="plotly-graph-div"') == 4
    assert len(re.findall(r"Plotly\.newPlot\(", page)) == 4
    for heading in ("Grid", "Timeline", "Buffer lifetimes", "Memory per rank over time"):
        assert f"<h2>{heading}" in page


def test_html_page_at_64_by_1024_carries_the_figures_and_stays_bounded(explorer_cli, tmp_path):
    out = tmp_path / "big.html"
    res = explorer_cli(
        "schedule",
        "--kind",
        "1f1b",
        "--stages",
        "64",
        "--microbatches",
        "1024",
        "--format",
        "html",
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    _assert_offline_with_figures(page)
    assert len(page.encode()) < 8_000_000, len(page.encode())  # plotly.js alone is about 4.7 MB
    assert "Steps 128–" in page and "lists every step" in page
    assert "rank 63" in page and "memory per rank" in page.lower()


def test_text_listing_shows_every_rank_and_a_summary(explorer_cli):
    res = explorer_cli("schedule", "--kind", "gpipe", "--stages", "2", "--microbatches", "2")
    assert res.returncode == 0
    assert res.stdout.count("# gpipe: stage") == 2 and "# verdict: valid" in res.stdout
    assert "step 1: 0L1b1 0F1b1 0SA1b1" in res.stdout  # PyTorch-style: send right after the forward
