"""Suite-wide settings: reproducible hypothesis under CI, and the test tiers kept honest.

Under CI (``CI=true``) hypothesis runs derandomized: the same examples on every run, so a
submission is judged on reproducible cases. Locally it explores new examples each run, which is
where new counterexamples are found (and then kept by hypothesis' example database).

Tiers. ``-m "not slow"`` is the tier a developer runs after every edit; it must stay under a
minute, so a test that starts a process (a subprocess, the CLI in a child, torchrun,
multiprocessing, a kernel, a browser) or a compiler (torch.compile) must be marked ``slow``.
That is enforced here rather than remembered: while a test without the mark sets up or runs,
every way of starting a process is refused, and a Dynamo compile fails the test, each with an
error that says what to do. ``gpu`` tests are skipped only where torch sees no
CUDA device.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")

# Inductor proves, in every process that first compiles for the CPU, that each vector ISA the
# CPU lists builds and loads: one `python -c "import torch; ..."` per ISA, about 3 s of CPU per
# compiling process (`explorer compile-probe --scenario cycling`: 9.1 -> 6.0 CPU-s). The suite's
# machines build AVX2 and AVX-512 with their gcc, so the suite says so once; the ISA is still
# read from /proc/cpuinfo and the compiles are real. Every process a test starts inherits it,
# the notebooks' kernels too. A user's own environment is left as it is (the explorer never
# sets it).
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")


# --- the fast tier starts no process ----------------------------------------------------------

#: Audit events (see the table in Python's docs) that start a process or replace this one.
PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
        "os.exec",
        "pty.spawn",
    }
)


class _ProcessGuard:
    """Refuses process starts while a test outside the slow tier sets up or runs.

    An audit hook cannot be removed once added, so one hook is installed per pytest process and
    consults ``test``; it is inert between tests and during ``slow`` tests. multiprocessing's
    ``spawn`` and ``forkserver`` contexts start children through ``_posixsubprocess`` without
    an audit event, so ``BaseProcess.start`` is refused directly as well.
    """

    def __init__(self) -> None:
        self.test: Optional[str] = None
        self.seen: list[str] = []
        sys.addaudithook(self._audit)

    def refusal(self, what: str) -> str:
        return (
            f"{self.test} is in the fast tier (not marked slow) but started a process: {what}. "
            "Mark it @pytest.mark.slow, or call the code in-process (e.g. explorer.cli.main([...]))."
        )

    def _audit(self, event: str, args: tuple) -> None:
        if self.test is None or event not in PROCESS_EVENTS:
            return
        what = f"{event}{_short(args)}"
        self.seen.append(what)
        raise RuntimeError(self.refusal(what))

    @contextmanager
    def forbidding(self, test: str) -> Iterator[None]:
        import multiprocessing.process

        original = multiprocessing.process.BaseProcess.start
        guard = self

        def start(process) -> None:
            what = f"multiprocessing start of {process!r}"
            guard.seen.append(what)
            raise RuntimeError(guard.refusal(what))

        self.test, self.seen = test, []
        multiprocessing.process.BaseProcess.start = start
        try:
            yield
        finally:
            multiprocessing.process.BaseProcess.start = original
            self.test = None


def _short(args: tuple) -> str:
    text = repr(args)
    return text if len(text) <= 200 else text[:200] + "...)"


_GUARD = _ProcessGuard()


def _frames_compiled() -> int:
    """Frames Dynamo has been asked to compile in this process (0 before torch is imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return int(utils.counters["frames"]["total"]) if utils is not None else 0


@contextmanager
def _tier(item: pytest.Item) -> Iterator[None]:
    """Outside the slow tier: no process may start, and Dynamo may compile nothing.

    A process start is refused as it happens. A compile cannot be refused without reaching into
    Dynamo, so it is found afterwards from Dynamo's own frame counter and fails the test.
    """
    if item.get_closest_marker("slow") is not None:
        yield
        return
    compiled = _frames_compiled()
    with _GUARD.forbidding(item.nodeid):
        yield
    if _GUARD.seen:  # the refusal was caught and swallowed by the code under test
        pytest.fail(_GUARD.refusal(_GUARD.seen[0]), pytrace=False)
    now = _frames_compiled()
    if now != compiled and now > 0:
        pytest.fail(
            f"{item.nodeid} is in the fast tier (not marked slow) but ran torch.compile "
            f"(Dynamo compiled {now - compiled if now > compiled else now} frame(s)). "
            "Mark it @pytest.mark.slow.",
            pytrace=False,
        )


# --- the CLI, in-process in the fast tier and in a child in the slow tier ----------------------


@pytest.fixture(
    params=[
        pytest.param("in-process", id="in-process"),
        pytest.param("child", id="child", marks=pytest.mark.slow),
    ]
)
def explorer_cli(request) -> Callable[..., Any]:
    """``explorer_cli(*args, cwd=None, env=None)``: run ``explorer ARGS`` and return its outcome.

    Each test that takes this fixture runs twice: ``explorer.cli.main`` called in this
    interpreter (fast tier) and ``python -m explorer.cli`` in a child (slow tier). Both answer
    with ``returncode``, ``stdout`` and ``stderr``. ``env`` needs a child: in-process it is an
    error, so a test that needs one is marked slow and starts its child itself.
    """
    from cli_in_process import call_cli, run_cli_child

    def run(*args: Any, cwd: Any = None, env: Optional[dict] = None, timeout: float = 300):
        if request.param == "child":
            return run_cli_child(args, cwd=cwd, env=env, timeout=timeout)
        if env is not None:
            raise ValueError("an environment needs a child process: mark the test slow")
        return call_cli(args, cwd=cwd)

    return run


# --- gpu tests run wherever torch sees a CUDA device ------------------------------------------

_GPUS: Optional[int] = None


@pytest.fixture(scope="session")
def cli_1f1b_run(tmp_path_factory) -> Any:
    """``explorer run --kind 1f1b --stages 2 --microbatches 4 --trace T --out F --json`` in a
    child, once per test run for every module that reads it (``shared_runs.CliRun``)."""
    from built_once import built_once
    from shared_runs import cli_1f1b_run

    return built_once(
        tmp_path_factory, "cli-1f1b-2x4", lambda: cli_1f1b_run(tmp_path_factory.mktemp("cli-1f1b"))
    )


@pytest.fixture(scope="session")
def built_lessons(tmp_path_factory) -> Any:
    """``explorer lesson build --out DIR`` of every lesson in a child, once per test run for the
    build's tests and the browser tier (``shared_runs.LessonBuild``); read it, never change it."""
    from built_once import built_once
    from shared_runs import all_lessons_built

    return built_once(
        tmp_path_factory, "lessons", lambda: all_lessons_built(tmp_path_factory.mktemp("lessons"))
    )


@pytest.fixture(scope="session")
def lesson_verdicts(tmp_path_factory) -> Any:
    """What each lesson stores, verdicts only (``lesson_data(..., figures=False)``), by slug in
    the lessons' order: computed apart from any page, once per test run, for the pages and the
    explorer's own answers to be judged against."""
    from built_once import built_once

    from explorer.lessons.build import lesson_data, lesson_sources
    from explorer.lessons.source import read_lesson

    return built_once(
        tmp_path_factory,
        "lesson-verdicts",
        lambda: {p.stem: lesson_data(read_lesson(p), figures=False) for p in lesson_sources()},
    )


def _cuda_devices() -> int:
    """How many CUDA devices torch sees, asked once, and only when a ``gpu`` test is about to run."""
    global _GPUS
    if _GPUS is None:
        try:
            import torch
        except ImportError:
            _GPUS = 0
        else:
            _GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return _GPUS


def _gpu_skip_reason(item: pytest.Item) -> Optional[str]:
    """Why a ``gpu`` test cannot run here: no CUDA device, or fewer than its ``gpus(n)`` marker asks."""
    if item.get_closest_marker("gpu") is None:
        return None
    found = _cuda_devices()
    if found == 0:
        return "needs a CUDA device"
    wanted = item.get_closest_marker("gpus")
    if wanted is not None and found < int(wanted.args[0]):
        return f"needs {wanted.args[0]} CUDA devices, this machine has {found}"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    _GROUP_BEFORE[item.nodeid] = _leftover_process_group()
    reason = _gpu_skip_reason(item)
    if reason is not None:
        pytest.skip(reason)
    with _tier(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with _tier(item):
        return (yield)


# --- no test leaves a process group behind ----------------------------------------------------


#: Per test id: whether a default group already existed when the test's setup began.
_GROUP_BEFORE: dict[str, bool] = {}


def _leftover_process_group() -> bool:
    """Whether this process still holds torch.distributed's default group (False before torch)."""
    dist = sys.modules.get("torch.distributed")
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: Optional[pytest.Item]):
    """A default process group is per process: one left by a test breaks the next one's
    ``init_process_group`` ("initialize the default process group twice") in the same worker,
    far from the cause. The group is destroyed here and the test that left it fails, named.
    Tests marked ``process_group`` keep theirs: DeepSpeed caches its groups process-wide, and
    a destroyed group breaks the next in-process DeepSpeed engine, as in a notebook kernel."""
    result = yield
    if (
        item.get_closest_marker("process_group") is None
        and not _GROUP_BEFORE.pop(item.nodeid, False)
        and _leftover_process_group()
    ):
        sys.modules["torch.distributed"].destroy_process_group()
        pytest.fail(
            f"{item.nodeid} left torch.distributed's default process group initialized: "
            "destroy it (dist.destroy_process_group()) or run the job in a child process.",
            pytrace=False,
        )
    return result


# --- no test leaves a job's rendezvous variables behind ----------------------------------------

#: What torch.distributed's launchers put in a rank's environment. DeepSpeed's
#: ``init_distributed`` sets them in its own process when it runs there (as in a notebook
#: kernel), so an in-process engine test would hand them to every later test's children: a
#: child then believes it is a rank of a job it is not part of.
_RENDEZVOUS = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _rendezvous_variables_restored() -> Iterator[None]:
    """Each test ends with the rendezvous variables it began with (set, changed or removed),
    unless it keeps its process group: a ``process_group`` test keeps DeepSpeed's group on
    purpose, as a notebook kernel does, and the variables describe that group (DeepSpeed's next
    engine in this process reads ``LOCAL_RANK`` and finds the group already there)."""
    before = {key: os.environ.get(key) for key in _RENDEZVOUS}
    yield
    if _leftover_process_group():
        return
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# --- a tier that selects nothing is not an error -----------------------------------------------

_DESELECTED = 0


def pytest_deselected(items: list) -> None:
    global _DESELECTED
    _DESELECTED += len(items)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """``-m "not slow"`` on a folder of slow tests (or ``-m slow`` on a fast one) selects nothing.

    pytest calls that exit 5, which would fail ``make test`` for a tier that is simply empty
    there. When tests were collected and the markers deselected every one, exit 0 instead; a
    path that collects nothing at all still exits 5.
    """
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and _DESELECTED:
        session.exitstatus = pytest.ExitCode.OK


# --- under pytest -n, one notebook's browser tests run on one worker --------------------------


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist load`` (what ``-n`` means alone), except that a notebook's browser tests go
    to one worker together, so its Run All (a module fixture, set up per worker) is done once.

    xdist's own ``--dist loadgroup`` would do it from ``xdist_group`` marks, but it renames
    node ids through an attribute pytest 9 no longer reads, so the marks are ignored. Units
    are made by :func:`notebook_claims.scheduling_unit` (imported here, where only the
    suite's controller calls it); every other test is a unit of its own, as under ``load``.
    An explicit ``--dist`` other than ``load`` is left to xdist.
    """
    if config.getoption("dist") != "load":
        return None
    from notebook_claims import scheduling_unit
    from xdist.scheduler import LoadScopeScheduling

    class NotebookScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    return NotebookScheduling(config, log)
