"""``explorer check RUN_FOLDER``: the P2P contract of a recorded run, on folders the real engine wrote.

Two runs of the explorer's engine on gloo, each made once per test run and shared with the other
modules that read it (``tests/conftest.py``, ``tests/pipeline/conftest.py``): the clean 1F1B on 2
ranks (``explorer run`` as a user types it) and the same-peer swap at pipeline size 2 (an eager backward in interleaved 1F1B,
untagged: :func:`test_pipeline_contract.eager_backward`); the swap's folder is also read back
into the static grid. PyTorch's engine's folders are checked in ``test_torch_messages.py``,
``explorer.instrument``'s in ``tests/deepspeed/test_check_instrumented.py``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from cli_in_process import call_cli

from explorer.pipeline.analysis import build


@pytest.fixture(scope="module")
def runs(cli_1f1b_run, swap_run) -> dict[str, Path]:
    """The clean run (``explorer run`` of 1F1B, 2 x 4: ``tests/shared_runs.py``) and the swap
    (shared with test_pipeline_contract), both made once per test run; read, never changed."""
    assert cli_1f1b_run.done.returncode == 0, cli_1f1b_run.done.stderr[-2000:]
    assert swap_run.details["contract"], swap_run.failure
    return {"clean": cli_1f1b_run.folder, "swap": swap_run.folder}


@pytest.mark.slow
def test_a_clean_run_folder_checks_clean(runs):
    text = call_cli(["check", str(runs["clean"])])
    assert text.returncode == 0, text.stderr
    # 1F1B, 2 stages, 4 micro-batches: 4 activations and 4 gradients, each sent and received
    assert text.stdout.startswith("P2P contract of the explorer engine's run: 16 send and receive")
    doc = json.loads(call_cli(["check", str(runs["clean"]), "--json"]).stdout)
    assert (doc["kind"], doc["ok"], doc["exchanges"], doc["contract"]) == (
        "pipeline-contract",
        True,
        16,
        [],
    )


@pytest.mark.slow
def test_a_run_off_the_reference_is_wrong_in_every_reader(runs, tmp_path):
    """The clean run's folder with its result as a run that finished off the reference writes
    it (not bitwise equal, as a nondeterministic model gives): every message still matches,
    and ``run --collect``, ``read`` and ``check`` all exit 1 with ``ok`` false, as the run did."""
    folder = shutil.copytree(runs["clean"], tmp_path / "off")
    result = json.loads((folder / "result.json").read_text())
    (folder / "result.json").write_text(json.dumps({**result, "bitwise_equal_to_reference": False}))
    for argv in (["run", "--collect"], ["read"], ["check"]):
        doc = json.loads(call_cli([*argv, str(folder), "--json"]).stdout)
        assert doc["ok"] is False and doc["failure"] is None, (argv, doc)
        text = call_cli([*argv, str(folder)])
        assert text.returncode == 1 and "WRONG" in text.stdout.upper(), (argv, text.stdout)
        assert not text.stdout.startswith("ok"), text.stdout
    said = call_cli(["check", str(folder), "--json"]).stdout
    assert "DIFFERENT from the reference" in json.loads(said)["wrong_result"]


@pytest.mark.slow
def test_the_swap_is_reported_at_its_place_with_exit_1(runs):
    text = call_cli(["check", str(runs["swap"])])
    assert text.returncode == 1 and "do not match the receive they met" in text.stdout
    assert text.stdout.splitlines()[1].startswith(
        "  P2P contract (swap) at stage 1 step 7 (RecvGrad(buffer_id=0))"
    )
    doc = json.loads(call_cli(["check", str(runs["swap"]), "--json"]).stdout)
    first = doc["contract"][0]
    assert not doc["ok"] and (first["kind"], first["stage"], first["step"]) == ("swap", 1, 7)
    assert doc["failure"]["kind"] == "contract" and doc["failure"]["rank"] == 1
    # the same verdict explorer read gives on the folder
    read = json.loads(call_cli(["read", str(runs["swap"]), "--json"]).stdout)
    assert read["contract"] == doc["contract"]


def _edited(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    path = dst / "rank1.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(edit(lines)) + "\n")
    return dst


def _without_p2p(line: str) -> str:
    doc = json.loads(line)
    doc.pop("p2p", None)
    doc.pop("reused", None)
    return json.dumps(doc)


@pytest.mark.slow
def test_partial_or_broken_metadata_is_one_line_and_exit_2(runs, tmp_path):
    def strip_first(lines: list[str]) -> list[str]:
        at = next(i for i, x in enumerate(lines) if '"p2p"' in x)
        return lines[:at] + [_without_p2p(lines[at])] + lines[at + 1 :]

    partial = call_cli(["check", str(_edited(runs["clean"], tmp_path / "p", strip_first))])
    assert partial.returncode == 2 and len(partial.stderr.strip().splitlines()) == 1
    assert "1 of 16 send and receive line(s) carry no p2p tuple" in partial.stderr
    assert "rank 1's 1RA0b0" in partial.stderr

    none = shutil.copytree(runs["clean"], tmp_path / "n")
    for path in sorted(none.glob("rank*.jsonl")):
        path.write_text("\n".join(_without_p2p(x) for x in path.read_text().splitlines()) + "\n")
    bare = call_cli(["check", str(none)])
    assert bare.returncode == 2 and "its 16 send and receive line(s) carry no p2p" in bare.stderr

    def damage(lines: list[str]) -> list[str]:
        return [x.replace("float32[4,32]", "float32[4,", 1) for x in lines]

    broken = call_cli(["check", str(_edited(runs["clean"], tmp_path / "b", damage))])
    assert broken.returncode == 2 and "'p2p' element" in broken.stderr
    assert len(broken.stderr.strip().splitlines()) == 1


def test_a_folder_that_is_no_run_folder_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    out = call_cli(["check", str(tmp_path)])
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "is not a run folder: expected spec.json" in out.stderr
    both = call_cli(["check", str(tmp_path), "--kind", "1f1b"])
    assert both.returncode == 2 and "drop --kind" in both.stderr


def _outlined(trace) -> set[tuple[int, int]]:
    """(stage, step) of every rectangle of an outline trace (points split by a gap, NaN)."""
    cells, xs, ys = set(), [], []
    for x, y in zip(list(trace.x) + [math.nan], list(trace.y) + [math.nan]):
        if x is None or math.isnan(x):
            if xs:
                cells.add((round((min(ys) + max(ys)) / 2), round((min(xs) + max(xs)) / 2)))
            xs, ys = [], []
        else:
            xs.append(x)
            ys.append(y)
    return cells


@pytest.mark.slow
def test_the_violation_is_marked_on_the_static_grid_at_its_cell(runs, tmp_path):
    from explorer.pipeline.analysis.check import check
    from explorer.pipeline.runtime.run_folder import collected, read_spec
    from explorer.pipeline.views.live import pinned_grid

    result = collected(runs["swap"])
    report = check(read_spec(runs["swap"]).build_schedule(), other_model=False)
    contract = result.details["contract"]
    fig = pinned_grid(report, result.failure, contract)
    traces = {t.name: t for t in fig.data}
    hazards = {(int(st), int(t)) for st, t in _outlined(traces["findings"])}
    assert {(v["stage"], v["step"]) for v in contract} <= hazards and (1, 7) in hazards
    assert _outlined(traces["selected"]) == {(1, 7)}  # the first one is the run's failure
    assert (list(traces["failure"].x), list(traces["failure"].y)) == ([7], [1])
    heat = traces["instructions"]
    lo = int(heat.x[0])
    assert "P2P CONTRACT (swap)" in heat.hovertext[1][7 - lo]
    assert "P2P CONTRACT" not in heat.hovertext[0][7 - lo]  # and not on another stage's cell
    # The page explorer read --html writes carries the same figure
    out = tmp_path / "swap.html"
    read = call_cli(["read", str(runs["swap"]), "--html", str(out)])
    assert read.returncode == 1 and "P2P CONTRACT (swap)" in out.read_text()


def test_contract_marks_are_outlined_and_said_like_hazards():
    """Pure view logic: a violation record (the fields a run's ``contract`` lists) on 1F1B."""
    from explorer.pipeline.analysis.check import check
    from explorer.pipeline.views.grid import grid_figure
    from explorer.pipeline.views.marks import contract_marks

    report = check(build("1f1b", 2, 4))
    assert report.ok  # no hazard of its own: every outline below is the mark's
    mark = {"stage": 1, "step": 3, "kind": "shape", "message": "tuple[0] differs", "hint": "pad"}
    fig = grid_figure(report, marks=contract_marks([mark]))
    traces = {t.name: t for t in fig.data}
    assert _outlined(traces["findings"]) == {(1, 3)}
    heat = traces["instructions"]
    assert "P2P CONTRACT (shape): tuple[0] differs; fix: pad" in heat.hovertext[1][3]
    assert _outlined({t.name: t for t in grid_figure(report).data}["findings"]) == set()


@pytest.mark.slow
def test_a_run_that_failed_of_another_cause_is_not_called_ok(seed_bug_run):
    """The seed's run: every message matched, but stage 2 lost its gradient (a buffer fault).
    ``check`` once said ``ok: true, failure: null`` of it while ``read`` said it failed."""
    _, result = seed_bug_run
    check = call_cli(["check", str(result.folder), "--json"])
    read = call_cli(["read", str(result.folder), "--json"])
    doc, back = json.loads(check.stdout), json.loads(read.stdout)
    assert check.returncode == read.returncode == 1, check.stderr
    assert doc["contract"] == [] and doc["ok"] is False and back["ok"] is False
    assert doc["failure"] == back["failure"] and doc["failure"]["kind"] == "buffer"
    text = call_cli(["check", str(result.folder)]).stdout.splitlines()
    # the lines it recorded, not "every message": a failed run may not have recorded them all
    assert text[0].endswith("the run recorded matches the receive it met")
    assert text[1].startswith("but the run failed of another cause: rank 2, stage 2, step 6")


@pytest.mark.slow
def test_read_html_never_writes_over_what_it_reads(runs, tmp_path):
    """``read DIR --html DIR/rank1.jsonl`` wrote the page over the rank's file: the next read
    described another run. A file of the folder (or the file read) is refused; a new one is not."""
    folder = shutil.copytree(runs["clean"], tmp_path / "run")
    before = (folder / "rank1.jsonl").read_bytes()
    for target in (folder / "rank1.jsonl", folder / "result.json"):
        said = call_cli(["read", str(folder), "--html", str(target)])
        assert said.returncode == 2 and "would overwrite a file of the folder" in said.stderr
    assert (folder / "rank1.jsonl").read_bytes() == before
    assert call_cli(["read", str(folder), "--html", str(folder / "page.html")]).returncode == 0
    assert call_cli(["read", str(folder)]).returncode == 0  # the page beside it changes nothing
