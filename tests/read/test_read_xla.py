"""``explorer read`` on what a real PyTorch/XLA run left behind gives ``xla-run``'s verdicts.

One real run (``xla-run --scenario logging --save-tensors --out DIR``, torch_xla 2.9 on PJRT
CPU) writes all four artifacts: ``--xla_dump_to`` dumps, the ``XLA_SAVE_TENSORS_FILE``, the
``PT_XLA_DEBUG_FILE`` and the metrics report. Only those four are copied to the folder that is
read, so nothing of ``xla-run``'s own bookkeeping (its step markers, run.json) can leak in.
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from built_once import built_once

from explorer.xla.traces.records import (
    DEBUG_FILE,
    DUMP_DIR,
    MESSAGES_FILE,
    METRICS_FILE,
    RUN_FILE,
    SAVE_FILE,
    STEP_KEYS,
)

pytestmark = pytest.mark.slow
STEPS = 7


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args], capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    """The run: its own JSON and exit code, and a folder holding only torch_xla's artifacts."""

    def launch():
        out = tmp_path_factory.mktemp("xla-run")
        got = cli(
            "xla-run",
            "--scenario",
            "logging",
            "--steps",
            str(STEPS),
            "--layers",
            "1",
            "--save-tensors",
            "--out",
            str(out),
            "--json",
        )
        assert got.returncode in (0, 1), got.stderr[-2000:]
        artifacts = tmp_path_factory.mktemp("artifacts")
        shutil.copytree(out / DUMP_DIR, artifacts / "dumps")
        (save,) = glob.glob(str(out / SAVE_FILE) + "*")  # torch_xla appends the device ordinal
        shutil.copy(save, artifacts / Path(save).name)
        shutil.copy(out / DEBUG_FILE, artifacts / "debug.log")
        shutil.copy(out / METRICS_FILE, artifacts / "metrics.txt")
        return {
            "doc": json.loads(got.stdout),
            "rc": got.returncode,
            "dir": artifacts,
            "save": save,
            "out": out,
        }

    return built_once(tmp_path_factory, "read-xla-logging-run", launch)


def _read(path: Path) -> tuple[dict, int]:
    got = cli("read", str(path), "--json")
    assert got.returncode in (0, 1), got.stderr
    return json.loads(got.stdout), got.returncode


def test_the_folder_reads_back_with_the_verdicts_xla_run_gave(ran):
    doc, rc = _read(ran["dir"])
    assert doc["kind"] == "xla"
    assert set(doc["artifacts"]) == {"dump", "save", "debug", "metrics"}
    want = ran["doc"]["steps"]
    assert len(doc["steps"]) == len(want) == STEPS
    for mine, theirs in zip(doc["steps"], want):
        assert tuple(mine) == STEP_KEYS
        for key in ("step", "compiled", "graph_hash", "num_parameters", "cause", "diff_summary"):
            assert mine[key] == theirs[key], (key, mine, theirs)
        assert mine["compile_ms"] is None and mine["execute_ms"] is None  # not in the artifacts
    assert [g["graph_hash"] for g in doc["graphs"]] == [
        g["graph_hash"] for g in ran["doc"]["graphs"]
    ]
    assert rc == ran["rc"] == 1  # logging makes a new graph after the warm-up steps
    assert any("per-step compile and execute times" in n for n in doc["cannot_answer"])
    assert doc["device"]["compiles_total"] == sum(s["compiled"] for s in want) + sum(
        1 for g in ran["doc"]["graphs"] if g["step"] < 0
    )


def test_each_artifact_alone_answers_what_it_holds_and_says_what_it_cannot(ran):
    want = ran["doc"]["steps"]
    new = [s["cause"].startswith("new graph: yes") for s in want]
    save, _ = _read(Path(ran["save"]))
    assert [s["cause"].startswith("new graph: yes") for s in save["steps"]] == new
    assert [s["graph_hash"] for s in save["steps"]] == [s["graph_hash"] for s in want]
    assert any("first execution of each graph hash" in n for n in save["cannot_answer"])

    debug, _ = _read(ran["dir"] / "debug.log")
    assert [s["compiled"] for s in debug["steps"]] == [s["compiled"] for s in want]
    assert any("no HLO" in n for n in debug["cannot_answer"])
    assert all("was not seen before (no HLO" in s["cause"] for s in debug["steps"] if s["compiled"])

    dumps, _ = _read(ran["dir"] / "dumps")
    assert dumps["steps"] == [] and len(dumps["graphs"]) == len(ran["doc"]["graphs"])
    assert any("steps and graph hashes" in n for n in dumps["cannot_answer"])

    metrics = cli("read", str(ran["dir"] / "metrics.txt"))
    assert metrics.returncode == 0 and "UncachedCompile" in metrics.stdout
    assert "cannot answer" in metrics.stdout


def test_one_hash_with_two_programs_is_reported_not_merged(ran, tmp_path):
    """A save file whose later block of a hash holds another program (one op changed)."""
    text = Path(ran["save"]).read_text()
    blocks = text.split("[ScheduleSyncTensorsGraph]")
    repeated = ran["doc"]["steps"][3]["graph_hash"]  # step 3 re-runs step 1's graph
    k = [i for i, b in enumerate(blocks) if f"Graph Hash: {repeated}" in b][1]
    assert " multiply(" in blocks[k]
    blocks[k] = blocks[k].replace(" multiply(", " subtract(", 1)
    planted = tmp_path / "save.txt"
    planted.write_text("[ScheduleSyncTensorsGraph]".join(blocks))
    doc, rc = _read(planted)
    (same,) = doc["same_hash_different_text"]
    assert same["graph_hash"] == repeated and same["steps"] == [1, 3]
    assert "changed" in same["diff_summary"]
    assert (
        "HLO differs from the text first saved under the same Graph Hash"
        in (doc["steps"][3]["cause"])
    )
    assert rc == 1


def _cut_logs(text: str) -> dict[str, str]:
    """The real log cut three ways: mid-line, between two lines of one block, after its first
    block (a whole block, so only the dumps can tell that the log stops early)."""
    mid = text.index("Graph Hash:", len(text) // 2) + 5
    in_block = text[: text.index("\n", mid) + 1]
    first_block = text.split("\n\n")[0] + "\n\n"
    assert "Compilation Analysis" in first_block  # the run starts by compiling
    return {
        "cut line": text[:mid],
        "inside an analysis block": in_block,
        "the dumps hold": first_block,
    }


def test_a_cut_debug_log_gives_no_clean_verdict(ran, tmp_path):
    """A log cut while written (a killed run, a file copied early) has lost what came after,
    which may be the recompile: read says so, ok false, exit 1, never the whole-run verdict."""
    from cli_in_process import call_cli

    whole = (ran["dir"] / "debug.log").read_text()
    for i, (said, text) in enumerate(_cut_logs(whole).items()):
        folder = tmp_path / str(i)
        shutil.copytree(ran["dir"] / "dumps", folder / "dumps")
        (folder / "debug.log").write_text(text)
        got = call_cli(["read", str(folder), "--json"])
        doc = json.loads(got.stdout)
        assert (got.returncode, doc["ok"], doc["failure"]["kind"]) == (1, False, "unfinished")
        assert said in doc["failure"]["message"], doc["failure"]
        shown = call_cli(["read", str(folder)])
        assert shown.returncode == 1 and "do not hold the whole run" in shown.stdout
    whole_folder = tmp_path / "whole"
    shutil.copytree(ran["dir"] / "dumps", whole_folder / "dumps")
    (whole_folder / "debug.log").write_text(whole)
    doc = json.loads(call_cli(["read", str(whole_folder), "--json"]).stdout)
    assert doc["failure"] is None and doc["steps"] == _read(ran["dir"])[0]["steps"]


@pytest.mark.parametrize("case", ["empty", "garbage", "truncated-save", "corrupt-dump"])
def test_broken_artifacts_are_one_line_and_exit_2(ran, tmp_path, case):
    if case == "empty":
        target = tmp_path / "debug.log"
        target.write_text("")
    elif case == "garbage":
        target = tmp_path / "save.txt"
        target.write_bytes(b"\x00\xff" * 500)
    elif case == "truncated-save":
        text = Path(ran["save"]).read_text()
        target = tmp_path / "save.txt"
        target.write_text(text[: text.index("## END_GRAPH", len(text) // 2) - 300])
    else:
        target = tmp_path / "run"
        target.mkdir()
        shutil.copy(ran["dir"] / "debug.log", target / "debug.log")
        (target / "module_0001.SyncTensorsGraph.85.before_optimizations.txt").write_text(
            "HloModule SyncTensorsGraph.85\n\nENTRY %e (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0\n"
        )
    got = cli("read", str(target))
    assert got.returncode == 2, got.stdout[-500:]
    assert len(got.stderr.strip().splitlines()) == 1 and "Traceback" not in got.stderr


def test_the_explorer_opens_the_folder(ran):
    from explorer.xla.app import XlaExplorer

    ex = XlaExplorer.open(str(ran["dir"]))
    assert [s.cause for s in ex.result.steps] == [s["cause"] for s in ran["doc"]["steps"]]
    assert len(ex.figures()) == 3 and ex.read.cannot_answer
    assert "not in these artifacts" in ex.status.value
    # artifacts alone do not say which scenario made them: no scenario shown, Run off until one is chosen
    assert ex.scenario.value is None and ex.scenario.get_state()["index"] is None
    assert ex.steps.value == STEPS and ex.run_button.disabled
    assert "choose a scenario to run one" in ex.status.value
    ex.scenario.value = "steady"
    assert not ex.run_button.disabled and ex.config().scenario == "steady"


def test_the_explorer_opens_its_own_run_with_the_controls_of_that_run(ran):
    """The notebook's case: the folder of a logging run. The controls showed ``steady`` and 6 steps
    over it; Run would have run another scenario than the one on screen."""
    from explorer.xla.app import XlaExplorer
    from explorer.xla.runtime.config import RunConfig
    from explorer.xla.traces.records import CONFIG_FILE

    ex = XlaExplorer.open(str(ran["out"]))
    shown = RunConfig.from_json((ran["out"] / CONFIG_FILE).read_text())
    assert (ex.scenario.value, ex.steps.value, ex.layers.value) == ("logging", STEPS, 1)
    assert ex.config().resolved() == shown and not ex.run_button.disabled
    assert "Run runs it again" in ex.status.value


def test_a_folder_used_again_holds_one_run_and_reads_as_that_run(ran, tmp_path):
    """``xla-run --out`` into the logging run's folder: the earlier run's dumps, save file and
    log go to ``previous/1/`` (once its dumps were paired with the new run's compiles, and its
    save file read as the new run's), and ``read`` of the folder says what the new run said."""
    folder = shutil.copytree(ran["out"], tmp_path / "again")
    got = cli("xla-run", "--scenario", "steady", "--steps", "3", "--layers", "1", "--out",
              str(folder), "--json")  # fmt: skip
    assert got.returncode in (0, 1), got.stderr[-2000:]
    doc = json.loads(got.stdout)
    kept = folder / "previous" / "1"
    assert (kept / DEBUG_FILE).is_file() and (kept / DUMP_DIR).is_dir()
    assert glob.glob(str(kept / SAVE_FILE) + "*") and not glob.glob(str(folder / SAVE_FILE) + "*")
    assert all(g["hlo_path"] for g in doc["graphs"])  # each compile has its own run's dump
    back, rc = _read(folder)
    assert rc == got.returncode
    assert [s["graph_hash"] for s in back["steps"]] == [s["graph_hash"] for s in doc["steps"]]
    assert [s["cause"] for s in back["steps"]] == [s["cause"] for s in doc["steps"]]
    assert not any("previous" in f for fs in back["artifacts"].values() for f in fs)


def test_a_set_aside_record_names_its_own_dumps(ran, tmp_path):
    """The set-aside ``run.json`` kept its absolute ``hlo_path``s, which then named the next
    run's dumps of the same module names. Repointed, each names the file where it now lies.
    (The record is the real run's; it is set aside here as ``launch`` sets it aside.)"""
    from explorer.xla.runtime.launch import _repoint_record

    target = tmp_path / "previous" / "1"
    shutil.copytree(ran["out"], target)
    _repoint_record(str(target), str(ran["out"]))
    paths = [g["hlo_path"] for g in json.loads((target / RUN_FILE).read_text())["graphs"]]
    assert paths and all(p.startswith(str(target / DUMP_DIR)) for p in paths if p)
    assert all(Path(p).is_file() for p in paths if p)
    before = [g["hlo_path"] for g in json.loads((ran["out"] / RUN_FILE).read_text())["graphs"]]
    assert [Path(p).name for p in paths] == [Path(p).name for p in before]


def test_a_run_cut_before_its_end_gives_no_clean_verdict(ran, tmp_path):
    """``xla-run`` stopped by Ctrl-C or a kill (exit 130, no ``run.json``) leaves its config, a
    log that may end cleanly on a block and as many dumps as compiles; ``read`` of that folder
    once said ``ok: true``, exit 0, of a run cut before the step that recompiles. The folder is
    the real run's, less what a run writes only at its end (the metrics report, ``run.json``)."""
    cut = Path(shutil.copytree(ran["out"], tmp_path / "cut"))
    (cut / METRICS_FILE).unlink()
    (cut / RUN_FILE).unlink()
    (cut / MESSAGES_FILE).unlink()  # a folder written before runs kept their messages
    doc, rc = _read(cut)
    assert rc == 1 and doc["ok"] is False
    assert doc["failure"]["kind"] == "unfinished", doc["failure"]
    assert "did not reach its end" in doc["failure"]["message"]
    assert f"asks for {STEPS} step(s)" in doc["failure"]["message"]
    text = cli("read", str(cut))
    assert text.returncode == 1 and "did not reach its end" in text.stdout
    # the whole folder, and the folder a finished run leaves without run.json (the explorer's
    # page runs without writing one), read as finished
    whole, _ = _read(ran["out"])
    assert whole["failure"] is None or whole["failure"]["kind"] != "unfinished"
    page_run = Path(shutil.copytree(ran["out"], tmp_path / "page"))
    (page_run / RUN_FILE).unlink()
    assert _read(page_run)[0]["failure"] is None


def test_the_runs_own_folder_reads_back_step_for_step_as_xla_run_said(ran):
    """The run keeps its child's messages (``messages.jsonl``): ``read`` splits the log where
    the run did, so every field of every step is what xla-run printed, times and device too
    (read once guessed the steps from the syncs, and took setup syncs for steps in a short
    run)."""
    doc, rc = _read(ran["out"])
    assert rc == ran["rc"] and doc["step_site"] == "the run's own step markers"
    assert doc["steps"] == ran["doc"]["steps"]
    assert [g["graph_hash"] for g in doc["graphs"]] == [
        g["graph_hash"] for g in ran["doc"]["graphs"]
    ]
    assert doc["device"].items() >= ran["doc"]["device"].items()  # read adds the metrics' totals
    assert not any("device and wrapper" in n for n in doc["cannot_answer"])


def test_a_run_stopped_after_three_steps_reads_as_those_steps_and_cut(ran, tmp_path):
    """What Ctrl-C after step 2 leaves: the messages up to it (they are written as they come),
    no metrics report and no ``run.json``. ``read`` shows the three steps as the run said them
    and no clean verdict (an interrupted run once read as ok, its setup syncs taken for its
    steps)."""
    cut = Path(shutil.copytree(ran["out"], tmp_path / "cut"))
    lines = (cut / MESSAGES_FILE).read_text().splitlines(keepends=True)
    third = [k for k, ln in enumerate(lines) if '"event": "step"' in ln][2]
    (cut / MESSAGES_FILE).write_text("".join(lines[: third + 1]))
    (cut / METRICS_FILE).unlink()
    (cut / RUN_FILE).unlink()
    doc, rc = _read(cut)
    assert rc == 1 and doc["ok"] is False and doc["failure"]["kind"] == "unfinished"
    assert "end after 3 step(s)" in doc["failure"]["message"]
    assert doc["steps"][:3] == ran["doc"]["steps"][:3]


def test_a_run_that_failed_reads_as_failed(tmp_path):
    """A step that raises at step 2: ``xla-run`` says so (exit 1); ``read`` of its folder once
    said ok with exit 0 from the two steps it finished."""
    (tmp_path / "failing_step.py").write_text(
        "import torch\nimport torch_xla.core.xla_model as xm\n"
        "def step(i):\n"
        "    if i == 2:\n        raise ValueError('broken at step 2')\n"
        "    x = torch.ones(4, device=xm.xla_device()) * i\n    xm.mark_step()\n"
    )
    out = tmp_path / "run"
    got = subprocess.run(
        [sys.executable, "-m", "explorer", "xla-run", "--step", "failing_step:step", "--steps",
         "4", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:{Path(__file__).resolve().parents[2]}"},
    )  # fmt: skip
    assert got.returncode == 1 and json.loads(got.stdout)["failure"]["kind"] == "exception"
    back = cli("read", str(out), "--json")
    doc = json.loads(back.stdout)
    assert back.returncode == 1 and doc["ok"] is False
    assert doc["failure"]["kind"] == "exception" and "broken at step 2" in doc["failure"]["message"]
    text = cli("read", str(out))
    assert (
        text.returncode == 1 and "the run that wrote this folder failed (exception)" in text.stdout
    )


def test_dumps_of_another_run_beside_this_ones_are_refused(ran, tmp_path):
    """Another run's ``hlo_dump`` copied into a subfolder: sorted by module number alone, its
    dumps were taken for this run's, each graph read from the other run's HLO, exit 0."""
    from cli_in_process import call_cli

    folder = tmp_path / "two_dump_folders"
    shutil.copytree(ran["out"], folder)
    shutil.copytree(ran["out"] / DUMP_DIR, folder / "backup" / "hlo_dump")
    got = call_cli(["read", str(folder)])
    assert got.returncode == 2 and got.stdout == "", got.stdout[-500:]
    assert "XLA module dumps lie in 2 folders" in got.stderr, got.stderr


def test_a_deleted_dump_gives_no_clean_verdict(ran, tmp_path):
    """The first dump deleted: the rest, paired with the compiles in order, named no graph's
    instructions, and read still said ok, exit 0."""
    from cli_in_process import call_cli

    folder = tmp_path / "one_dump_gone"
    shutil.copytree(ran["dir"], folder)
    (first, *_) = sorted((folder / "dumps").glob("module_*.before_optimizations.txt"))
    first.unlink()
    got = call_cli(["read", str(folder), "--json"])
    doc = json.loads(got.stdout)
    assert (got.returncode, doc["ok"], doc["failure"]["kind"]) == (1, False, "unfinished")
    assert "a dump is missing" in doc["failure"]["message"], doc["failure"]


@pytest.mark.parametrize("edit", ["graph-hash-in-the-log", "a-time-in-the-messages"])
def test_artifacts_that_disagree_with_the_runs_record_are_refused(ran, tmp_path, edit):
    """A graph hash edited in the debug log, or a time in the run's messages: read judged the
    edited figures clean, exit 0, though run.json beside them said otherwise."""
    from cli_in_process import call_cli

    folder = tmp_path / edit
    shutil.copytree(ran["out"], folder)
    record = json.loads((folder / "run.json").read_text())
    step = record["steps"][-1]
    if edit == "graph-hash-in-the-log":
        log = folder / DEBUG_FILE
        log.write_text(log.read_text().replace(step["graph_hash"], "deadbeef" + "0" * 24))
    else:
        messages = folder / "messages.jsonl"
        lines = [json.loads(x) for x in messages.read_text().splitlines()]
        for msg in lines:
            if msg.get("event") == "step" and msg.get("step") == step["step"]:
                msg["execute_ms"] = 123456.0
        messages.write_text("".join(json.dumps(m) + "\n" for m in lines))
    assert _read(ran["out"])[1] == ran["rc"]  # the run as it was still reads as it said
    got = call_cli(["read", str(folder)])
    assert got.returncode == 2 and got.stdout == "", got.stdout[-500:]
    assert "run.json" in got.stderr and "and the artifacts beside it disagree" in got.stderr
