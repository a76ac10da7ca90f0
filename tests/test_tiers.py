"""The tier rules in ``tests/conftest.py`` hold: checked on planted tests in a separate pytest.

Each case writes a small test file next to a copy of the suite's ``conftest.py`` and runs pytest
on it in a child process (so these are slow): a fast test that starts a process or compiles
fails with the advice, the same test marked slow passes, a tier that deselects everything
exits 0, and a ``gpu`` test is skipped with the one reason allowed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# Imported here, at collection, not inside a test: pytester restores ``sys.modules`` after each
# test, and a torch (and numpy) first imported inside one would be dropped, so the next test to
# import numpy in this process fails with "cannot load module more than once per process".
import torch

pytestmark = pytest.mark.slow

CONFTEST = (Path(__file__).with_name("conftest.py")).read_text()
INI = """
[pytest]
addopts = --strict-markers -p no:cacheprovider
markers =
    slow: slow
    gpu: gpu
    process_group: process_group
"""


@pytest.fixture
def planted(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    return pytester


@pytest.mark.parametrize(
    "body, words",
    [
        ("import subprocess\n    subprocess.run(['true'])", "subprocess.Popen"),
        ("import os\n    os.system('true')", "os.system"),
        (
            "import multiprocessing\n    p = multiprocessing.get_context('spawn').Process("
            "target=print)\n    p.start()",
            "multiprocessing start",
        ),
        (
            "import subprocess\n    try:\n        subprocess.run(['true'])\n"
            "    except Exception:\n        pass  # swallowed: still found",
            "subprocess.Popen",
        ),
    ],
    ids=["subprocess", "os.system", "multiprocessing-spawn", "swallowed"],
)
def test_a_fast_test_that_starts_a_process_fails_and_says_what_to_do(planted, body, words):
    planted.makepyfile(f"def test_starts():\n    {body}\n")
    result = planted.runpytest_subprocess("-m", "not slow")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*in the fast tier (not marked slow) but started a process*"])
    assert words in result.stdout.str() and "Mark it @pytest.mark.slow" in result.stdout.str()


def test_the_same_test_marked_slow_may_start_a_process(planted):
    planted.makepyfile(
        "import pytest, subprocess\n\n"
        "@pytest.mark.slow\ndef test_starts():\n    subprocess.run(['true'], check=True)\n"
    )
    planted.runpytest_subprocess().assert_outcomes(passed=1)


def test_a_fast_test_that_runs_torch_compile_fails(planted):
    planted.makepyfile(
        "import torch\n\n"
        "def test_compiles():\n"
        "    torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))\n"
    )
    result = planted.runpytest_subprocess("-m", "not slow")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*in the fast tier (not marked slow) but ran torch.compile*"])


def test_a_tier_that_selects_nothing_exits_0_but_an_empty_path_still_exits_5(planted):
    planted.makepyfile("import pytest\n\n@pytest.mark.slow\ndef test_slow():\n    pass\n")
    assert planted.runpytest_subprocess("-m", "not slow").ret == 0
    empty = planted.mkdir("empty")
    assert planted.runpytest_subprocess(str(empty)).ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_a_gpu_test_is_skipped_only_for_want_of_a_cuda_device(planted):
    planted.makepyfile(
        "import pytest\n\n@pytest.mark.gpu\ndef test_gpu():\n"
        "    import torch\n    assert torch.cuda.is_available()\n"
    )
    result = planted.runpytest_subprocess("-rs")
    if torch.cuda.is_available():
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["*needs a CUDA device*"])


def test_a_test_that_leaves_a_process_group_fails_by_name_and_the_next_one_starts_clean(planted):
    """The leak is pinned on the test that made it, not on a later test's "initialize twice"."""
    planted.makepyfile(
        """
import pytest
import torch.distributed as dist

def _init(tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "s"), 1), rank=0,
                            world_size=1)

@pytest.mark.slow
def test_leaks(tmp_path):
    _init(tmp_path)

@pytest.mark.slow
def test_after(tmp_path):
    _init(tmp_path)
    dist.destroy_process_group()

@pytest.mark.slow
@pytest.mark.process_group
def test_keeps_on_purpose(tmp_path):
    _init(tmp_path)

@pytest.mark.slow
def test_runs_beside_the_kept_group():
    assert dist.is_initialized()
"""
    )
    result = planted.runpytest_subprocess()
    result.assert_outcomes(passed=4, errors=1)
    out = result.stdout.str()
    assert "test_leaks left torch.distributed's default process group initialized" in out
    assert "test_after" not in out.split("short test summary")[-1]


def test_a_jobs_rendezvous_variables_set_by_one_test_are_gone_for_the_next(planted, monkeypatch):
    """DeepSpeed's in-process ``init_distributed`` sets RANK/MASTER_PORT in the test's process;
    a later test's child must not inherit a job it is not part of. A value that was there
    before the test (a user's own) is put back, not removed. A test that keeps its group on
    purpose keeps the variables that describe it (DeepSpeed's next engine reads them)."""
    planted.makepyfile(
        """
import os

import pytest
import torch.distributed as dist

def test_sets():
    os.environ["RANK"] = "0"
    os.environ["MASTER_PORT"] = "29500"
    os.environ["WORLD_SIZE"] = "7"

def test_next_sees_none_of_them():
    assert "RANK" not in os.environ and "MASTER_PORT" not in os.environ
    assert os.environ.get("WORLD_SIZE") == "3"

@pytest.mark.slow
@pytest.mark.process_group
def test_keeps_its_group_and_what_describes_it(tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "s"), 1), rank=0,
                            world_size=1)
    os.environ["LOCAL_RANK"] = "0"

@pytest.mark.slow
def test_a_kept_group_keeps_its_variables():
    assert dist.is_initialized() and os.environ.get("LOCAL_RANK") == "0"
"""
    )
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    planted.runpytest_subprocess().assert_outcomes(passed=4)


@pytest.mark.parametrize(
    "gpus, marker, reason",
    [
        (0, None, "needs a CUDA device"),
        (1, 2, "needs 2 CUDA devices, this machine has 1"),
        (2, 2, None),
        (1, None, None),
    ],
)
def test_a_gpu_test_that_needs_several_gpus_says_how_many_it_found(
    monkeypatch, gpus, marker, reason
):
    """NCCL between ranks on one GPU ran one stage and no exchange, and still passed."""
    import importlib.util

    # tests/conftest.py itself, by path: a bare `import conftest` may find a subfolder's
    where = importlib.util.spec_from_file_location(
        "tiers_conftest", Path(__file__).with_name("conftest.py")
    )
    assert where is not None and where.loader is not None
    conftest = importlib.util.module_from_spec(where)
    where.loader.exec_module(conftest)
    monkeypatch.setattr(conftest, "_GPUS", gpus)
    marks = {"gpu": pytest.mark.gpu.mark, "gpus": pytest.mark.gpus(marker).mark if marker else None}

    class Item:
        def get_closest_marker(self, name):
            return marks.get(name)

    assert conftest._gpu_skip_reason(Item()) == reason
