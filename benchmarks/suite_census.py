"""Where the test suite's CPU goes: every Python process it starts, counted.

``--durations`` says which tests take long, not what their time is spent on. This runs the suite
(or the pytest arguments given) with a start-up hook in the venv that writes one line per Python
process at its exit: its command line, the test that was running when it started
(``PYTEST_CURRENT_TEST``, which children inherit), whether it imported torch, DeepSpeed or
torch_xla, and its CPU time. Then it prints the totals by kind of process and by test file.

    .venv/bin/python benchmarks/suite_census.py -- -n 2
    .venv/bin/python benchmarks/suite_census.py --read census.jsonl

The hook is two files in the venv's site-packages, removed when the run ends; it is inert
unless ``CENSUS_OUT`` is set. A process killed by ``SIGKILL`` writes nothing (the supervisor's
final kill of an already-ended group loses nothing: those processes have exited). Chromium,
node and the C++ compiler are not Python and are not counted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Iterable

HOOK = """
import os
if os.environ.get("CENSUS_OUT"):
    import atexit, json, resource, signal, sys, time
    _start = time.time()
    _written = []

    def _census_write(how):
        if _written:
            return
        _written.append(how)
        try:
            use = resource.getrusage(resource.RUSAGE_SELF)
            mods = sys.modules
            line = json.dumps({
                "pid": os.getpid(), "how": how, "argv": [str(a)[:160] for a in sys.argv[:8]],
                "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
                "torch": "torch" in mods, "deepspeed": "deepspeed" in mods,
                "xla": "torch_xla" in mods, "pytest": "pytest" in mods,
                "cpu": use.ru_utime + use.ru_stime, "wall": time.time() - _start,
            })
            with open(os.environ["CENSUS_OUT"], "a") as out:
                out.write(line + "\\n")
        except Exception:
            pass

    atexit.register(_census_write, "exit")
    _real_exit = os._exit

    def _exit(code, _real=_real_exit):
        _census_write("os._exit")
        _real(code)

    os._exit = _exit

    def _on_term(signum, frame):
        _census_write("SIGTERM")
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_term)
"""

#: What a rank or helper process's script is called, by the part of the suite that starts it.
OWN_RANKS = {"worker.py", "torch_worker.py", "rank_worker.py"}


def kind(rec: dict) -> str:
    """A short name for what started this process and why it costs what it does."""
    argv = rec["argv"]
    script = argv[0].rsplit("/", 1)[-1] if argv else ""
    if rec["pytest"] and (script == "-c" or "pytest" in argv[0]):
        return "pytest process (in-process tests)"
    if script in OWN_RANKS:
        return "the explorer's own ranks"
    if "ipykernel" in " ".join(argv):
        return "notebook kernel"
    if script in ("run.py", "torchrun", "launch.py", "deepspeed"):
        return "launcher (torchrun, deepspeed)"
    if script in ("cli.py", "__main__.py", "explorer"):
        return "explorer command" + (" (imports torch)" if rec["torch"] else "")
    if rec["xla"]:
        return "torch_xla process"
    if rec["torch"]:
        return "other process importing torch" + (" and DeepSpeed" if rec["deepspeed"] else "")
    return "other Python"


def report(records: list[dict], torch_import_s: float) -> Iterable[str]:
    """The totals, by kind and by test file."""
    total = sum(r["cpu"] for r in records)
    importers = [r for r in records if r["torch"]]
    yield f"{len(records)} Python processes, {total:.0f} s of CPU"
    yield (
        f"{len(importers)} imported torch ({sum(r['cpu'] for r in importers):.0f} s of CPU); "
        f"at {torch_import_s:.1f} s per import that is {len(importers) * torch_import_s:.0f} s, "
        f"{100 * len(importers) * torch_import_s / max(total, 1e-9):.0f}% of all"
    )
    by_kind: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for r in records:
        by_kind[kind(r)][0] += 1
        by_kind[kind(r)][1] += r["cpu"]
    yield ""
    for name, (n, cpu) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        yield f"{cpu:8.0f} s  {int(n):5d} processes  {name}"
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for r in records:
        if r["test"] and not kind(r).startswith("pytest"):
            name = r["test"].split("::")[0]
            by_file[name][0] += 1
            by_file[name][1] += r["cpu"]
    yield ""
    yield "children's CPU by test file (the 25 largest)"
    for name, (n, cpu) in sorted(by_file.items(), key=lambda kv: -kv[1][1])[:25]:
        yield f"{cpu:8.0f} s  {int(n):5d} processes  {name}"


def torch_import_cpu() -> float:
    """CPU seconds of ``import torch`` in a fresh process here (best of 3)."""
    best = float("inf")
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", "import torch"])
        _, _, use = os.wait4(proc.pid, 0)
        best = min(best, use.ru_utime + use.ru_stime)
    return best


def run_suite(out: Path, pytest_args: list[str]) -> int:
    """The suite with the hook in place; the hook is gone again however the run ends."""
    site = Path(sysconfig.get_paths()["purelib"])
    module, pth = site / "_suite_census_hook.py", site / "zz_suite_census.pth"
    module.write_text(HOOK)
    # Only a process with CENSUS_OUT set imports the hook, so nothing else that starts while
    # the files come and go is touched (the .pth goes first, the module it names last).
    pth.write_text('import os; os.environ.get("CENSUS_OUT") and __import__("_suite_census_hook")\n')
    try:
        env = dict(os.environ, CENSUS_OUT=str(out))
        return subprocess.call([sys.executable, "-m", "pytest", *pytest_args], env=env)
    finally:
        pth.unlink(missing_ok=True)
        module.unlink(missing_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("suite_census.jsonl"))
    ap.add_argument("--read", type=Path, help="only print the totals of an earlier census")
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments")
    args = ap.parse_args()
    if args.read is None:
        args.out.unlink(missing_ok=True)
        rc = run_suite(args.out, args.pytest_args)
        print(f"pytest exited {rc}")
    path = args.read or args.out
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for line in report(records, torch_import_cpu()):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
