"""``explorer check --sweep``, ``explorer fix`` and ``--rules``, through the real CLI.

A sweep checks its sizes in worker processes, so sweeps are slow; the refusals, made before any
worker starts, take ``explorer_cli`` and run in-process (fast tier) and in a child (slow tier).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
import time

import pytest
from cli_in_process import run_cli_child
from repair_classes import SEED_CLASS, TODAY_CLASS

SEED = ["--kind", "deepspeed-train", "--buffers", "fixed", "--order", "legacy"]


def cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_cli_child(args, env=env, timeout=timeout)


@pytest.mark.slow  # the sweep runs in worker processes
def test_a_clean_schedule_says_so_for_every_size():
    out = cli("check", "--kind", "1f1b", "--sweep", "2-8:1-16")
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.strip()
        == "no hazard, mismatch, deadlock or wrong gradient count at any of 112 sizes in 2-8:1-16"
    )


@pytest.mark.slow  # the sweep runs in worker processes
def test_the_seed_fails_first_at_3_by_3_and_json_has_every_cell():
    out = cli("check", *SEED, "--sweep", "2-6:1-8", "--json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "sweep" and doc["sizes"] == 40 and len(doc["cells"]) == 40
    worst = doc["smallest_failing"]
    assert (worst["stages"], worst["microbatches"]) == (3, 3) and worst["hazards"] > 0
    assert worst["first"]["instruction"] == "SendGrad(buffer_id=0)" and worst["first"]["step"] == 5
    assert doc["clean"] == sum(c["ok"] is True for c in doc["cells"])
    assert {c["stages"] for c in doc["cells"]} == {2, 3, 4, 5, 6}


@pytest.mark.slow  # the sweep runs in worker processes
def test_rules_fix_the_seed_over_every_size_and_in_one_check():
    out = cli("check", *SEED, "--rules", "grads-first", "--sweep", "2-16:1-40")
    assert out.returncode == 0 and "at any of 600 sizes in 2-16:1-40" in out.stdout, (
        out.stdout + out.stderr
    )
    one = cli(
        "schedule",
        *SEED,
        "--rules",
        "grads-first",
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--stage",
        "2",
    )
    assert (
        one.returncode == 0
        and "[2, SendGrad(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)]"
        in one.stdout
    )


@pytest.mark.parametrize(
    "args, words",
    [
        (["--sweep", "8-2:1-4"], "reversed"),
        (["--sweep", "2-8"], "STAGES:MICROBATCHES"),
        (["--sweep", "1-256:1-4096"], "more than"),
        (["--sweep", "2-4:1-4", "--stages", "4"], "leave out --stages"),
        (["--sweep", "2-4:1-4", "--rules", "grads-first,bogus"], "unknown rule 'bogus'"),
        (["--sweep", "2-4:0-4"], "between 1 and"),
        (["--sweep", "2-4:1-4", "--workers", "0"], "--workers"),
    ],
)
def test_bad_sweeps_give_one_line_and_exit_2(explorer_cli, args, words):
    out = explorer_cli("check", "--kind", "1f1b", *args)
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, (
        out.stderr
    )
    assert words in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "option, words", [(["--costs", "F=-5"], "drop --costs"), (["--stage", "1"], "drop --stage")]
)
def test_fix_refuses_what_its_sweeps_would_ignore(explorer_cli, option, words):
    out = explorer_cli("fix", "--kind", "1f1b", "--sweep", "2-3:1-2", *option)
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.strip().splitlines()) == 1
    assert words in out.stderr and "Traceback" not in out.stderr


def _read_until_cells_are_checked(fd: int, deadline_s: float = 300.0) -> bytes:
    """The terminal output of a sweep up to its first progress bar with a checked size (the
    bar is drawn on a terminal only); the deadline is a hang back-stop."""
    seen, end = b"", time.monotonic() + deadline_s
    while not re.search(rb"\] [1-9][0-9,]*/", seen):
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        assert ready, f"no size checked within {deadline_s:.0f} s: {seen[-300:]!r}"
        seen += os.read(fd, 4096)  # OSError when the child ended first: a failure too
    return seen


def _drain(fd: int) -> None:
    """Keep reading the terminal so the child never blocks on a full one, until it closes."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


def _sigint_as_at_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_keeps_what_was_checked():
    """Ctrl-C once the first sizes are checked (seen on the progress bar, not after a guessed
    sleep): exit 130, and the JSON holds the sizes checked so far, all of them."""
    terminal, child_side = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "explorer.cli",
            "check",
            "--kind",
            "1f1b",
            "--sweep",
            "2-64:1-256",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=child_side,
        text=True,
        # As a user's shell starts it: a suite started in the background (``make test &``)
        # passes SIGINT on ignored, and Python then installs no KeyboardInterrupt handler, so
        # the signal would do nothing and the sweep would run to its end.
        preexec_fn=_sigint_as_at_a_terminal,
    )
    os.close(child_side)
    try:
        shown = _read_until_cells_are_checked(terminal)
        proc.send_signal(signal.SIGINT)
        drain = threading.Thread(target=_drain, args=(terminal,), daemon=True)
        drain.start()
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(terminal)
    assert proc.returncode == 130, shown[-500:]
    doc = json.loads(out)
    assert doc["interrupted"] and 0 < len(doc["cells"]) < 63 * 256
    assert all(c["ok"] for c in doc["cells"])


@pytest.mark.slow
def test_deepspeed_081_without_plus_one_fails_the_sweep_and_todays_class_passes(with_ds081):
    broken = cli("check", "--from", SEED_CLASS, "--sweep", "2-8:1-16", env=with_ds081)
    assert broken.returncode == 1, broken.stderr
    assert (
        "smallest failing size: 3 stages x 3 micro-batches: stage 1 step 5: SendGrad(buffer_id=0)"
        in broken.stdout
    )
    today = cli("check", "--from", TODAY_CLASS, "--sweep", "2-8:1-16", env=with_ds081)
    assert today.returncode == 0 and "at any of 112 sizes in 2-8:1-16" in today.stdout, (
        today.stdout + today.stderr
    )


@pytest.mark.slow
def test_fix_on_the_seeds_class_keeps_the_smaller_buffers_and_holds_wider(with_ds081):
    out = cli("fix", "--from", SEED_CLASS, "--sweep", "2-6:1-12", "--json", env=with_ds081)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "fix"
    best = doc["candidates"][0]
    assert (
        best["rules"] == ["grads-first"]
        and best["proven_over"] == "2-6:1-12"
        and best["buffers"] == [4, 3, 2, 2]
    )
    assert (
        "+ [2, SendGrad(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)]"
        in best["diff"]
    )
    rejected = {tuple(c["rules"]): c for c in doc["rejected"]}
    assert rejected[("defer-recv",)]["fails_at"]["deadlocks"] == 1
    wider = cli(
        "check",
        "--from",
        SEED_CLASS,
        "--rules",
        "grads-first",
        "--sweep",
        "2-12:1-32",
        env=with_ds081,
    )
    assert wider.returncode == 0 and "at any of 352 sizes in 2-12:1-32" in wider.stdout, (
        wider.stdout + wider.stderr
    )


@pytest.mark.slow
def test_a_class_that_hangs_or_exits_is_named_not_obeyed(tmp_path):
    (tmp_path / "badclasses.py").write_text(
        "import sys, time\n"
        "class Base:\n"
        "    def __init__(self, micro_batches, stages, stage_id):\n"
        "        self.micro_batches, self.stages, self.stage_id = micro_batches, stages, stage_id\n"
        "    def num_pipe_buffers(self):\n        return 2\n"
        "class Sleeps(Base):\n    def steps(self):\n        time.sleep(600)\n        yield []\n"
        "class Exits(Base):\n    def steps(self):\n        sys.exit(3)\n        yield []\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    slow = cli(
        "check",
        "--from",
        "badclasses:Sleeps",
        "--sweep",
        "2-3:1-2",
        "--timeout",
        "3",
        env=env,
        timeout=120,
    )
    assert (
        slow.returncode == 2 and "took longer than 3 s" in slow.stderr and "2x1" in slow.stderr
    ), slow.stderr
    gone = cli("check", "--from", "badclasses:Exits", "--sweep", "2-3:1-2", env=env, timeout=120)
    assert (
        gone.returncode == 2
        and len(gone.stderr.strip().splitlines()) == 1
        and "Traceback" not in gone.stderr
    ), gone.stderr


@pytest.mark.slow
def test_a_class_that_computes_nothing_is_refused_not_blamed_for_an_index_error(tmp_path):
    (tmp_path / "emptyclasses.py").write_text(
        "class Empty:\n"
        "    def __init__(self, micro_batches, stages, stage_id):\n        pass\n"
        "    def num_pipe_buffers(self):\n        return 1\n"
        "    def steps(self):\n        yield []\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    size = ["--stages", "2", "--microbatches", "2"]
    for args in (
        ["schedule", *size],
        ["check", *size],
        ["check", "--sweep", "2:1-2"],
        ["fix", "--sweep", "2:1-2"],
    ):
        out = cli(*args, "--from", "emptyclasses:Empty", env=env, timeout=120)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and not out.stdout, (args, out.stderr)
        assert "holds no compute action" in lines[0] and "IndexError" not in lines[0], args


@pytest.mark.slow
def test_run_with_the_found_rule_is_bitwise_equal_to_the_reference():
    out = cli(
        "run", *SEED, "--stages", "4", "--microbatches", "8", "--rules", "grads-first", "--json"
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] and doc["bitwise_equal_to_reference"] is True


@pytest.mark.slow
def test_the_seeds_class_fails_for_real_and_runs_bitwise_equal_with_the_found_rule(with_ds081):
    broken = cli(
        "run",
        "--from",
        SEED_CLASS,
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--json",
        env=with_ds081,
    )
    assert broken.returncode == 1, broken.stderr
    failure = json.loads(broken.stdout)[
        "failure"
    ]  # the real run fails where the sweep said, as DeepSpeed did
    assert (failure["stage"], failure["step"]) == (2, 6) and "inputs[0].grad is None" in failure[
        "message"
    ]
    fixed = cli(
        "run",
        "--from",
        SEED_CLASS,
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--rules",
        "grads-first",
        "--json",
        env=with_ds081,
    )
    assert fixed.returncode == 0, fixed.stderr
    doc = json.loads(fixed.stdout)
    assert doc["ok"] and doc["bitwise_equal_to_reference"] is True


#: Option sets whose sweep must ask each size what the single check asks (one verdict): a kind
#: the gradient invariant does not apply to, the seed, and every option that changes the question.
ONE_VERDICT = [
    ["--kind", "deepspeed-inference"],
    SEED,
    ["--kind", "1f1b", "--model", "blocking"],
    ["--kind", "interleaved-1f1b", "--chunks", "2", "--communicators", "lazy"],
    ["--kind", "interleaved-1f1b", "--chunks", "2", "--receives", "deferred"],
    ["--kind", "1f1b", "--parity", "--batching", "adjacent"],
]


@pytest.mark.slow  # each sweep runs in worker processes
@pytest.mark.parametrize("options", ONE_VERDICT, ids=" ".join)
def test_the_sweep_and_the_single_check_give_one_verdict(options):
    from cli_in_process import call_cli

    swept = cli("check", *options, "--sweep", "2-4:1-6", "--json", "--workers", "1")
    assert swept.returncode in (0, 1), swept.stderr
    cells = json.loads(swept.stdout)["cells"]
    assert len(cells) == 18
    for cell in cells:
        size = ["--stages", str(cell["stages"]), "--microbatches", str(cell["microbatches"])]
        single = call_cli(["check", *options, *size, "--json"])
        if cell["skipped"]:  # no verdict, as the single check gives none: not a failing size
            assert cell["ok"] is None
            assert single.returncode == 2 and cell["skipped"] in single.stderr
            continue
        doc = json.loads(single.stdout)
        assert cell["ok"] == doc["ok"] == (single.returncode == 0), (options, size)
        assert cell["hazards"] == len(doc["hazards"])
        assert cell["gradients"] == len(doc["gradients"]["not_exactly_once"])
    assert json.loads(swept.stdout)["clean"] == sum(c["ok"] is True for c in cells)
