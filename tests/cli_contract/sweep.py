"""Run every bad-input table through the real CLI and print the figures per command.

    .venv/bin/python -m tests.cli_contract.sweep            # the cases refused in the CLI's process
    .venv/bin/python -m tests.cli_contract.sweep --slow     # also those that load user code in a child
    PYTHONPATH=/path/to/other/checkout .venv/bin/python -m tests.cli_contract.sweep --as-limit-mb 4096
                                                            # another version's figures, memory capped

For each command: how many bad invocations were tried, how many gave exit 2 with exactly one
line on stderr and no traceback, how many of those lines name the constraint (the table's
words), and how many stayed within the time and memory bounds. Every miss is listed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .contract import Case, run_cli
from .fixtures import make_bad_folder
from .test_check_bad_input import CHECK_CASES
from .test_compile_probe_bad_input import COMPILE_PROBE_CASES
from .test_hlo_diff_bad_input import HLO_DIFF_CASES
from .test_hlo_list_bad_input import HLO_LIST_CASES
from .test_run_bad_input import RUN_CASES
from .test_schedule_bad_input import SCHEDULE_CASES
from .test_xla_run_bad_input import XLA_RUN_CASES

TABLES = {
    "check": CHECK_CASES,
    "schedule": SCHEDULE_CASES,
    "run": RUN_CASES,
    "xla-run": XLA_RUN_CASES,
    "hlo-list": HLO_LIST_CASES,
    "hlo-diff": HLO_DIFF_CASES,
    "compile-probe": COMPILE_PROBE_CASES,
}


def _verdict(command: str, case: Case, folder: Path, env: dict) -> tuple[str, str, Case, list[str]]:
    argv = [command, *(a.replace("{d}", str(folder)) for a in case.argv)]
    ran = run_cli(argv, str(folder), timeout=max(60.0, 4 * case.seconds), env=env)
    lines = ran.stderr.splitlines()
    misses = []
    one_line = (
        ran.returncode == 2 and len(lines) == 1 and "Traceback" not in ran.stderr and not ran.stdout
    )
    if not one_line:
        misses.append(
            f"exit {ran.returncode}, {len(lines)} stderr line(s), "
            f"{'traceback' if 'Traceback' in ran.stderr else 'no traceback'}: {ran.stderr[-200:]!r}"
        )
    elif case.needle.lower() not in lines[0].lower():
        misses.append(f"does not name {case.needle!r}: {lines[0][:200]!r}")
    if ran.seconds >= case.seconds or not ran.max_rss_mb < case.megabytes:
        misses.append(
            f"{ran.seconds:.1f} s, {ran.max_rss_mb:.0f} MB (bounds {case.seconds} s, {case.megabytes} MB)"
        )
    kind = (
        "ok"
        if not misses
        else "named"
        if one_line and len(misses) == 1 and "MB" in misses[0]
        else "one-line"
        if one_line
        else "broken"
    )
    return command, kind, case, misses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", action="store_true", help="include the cases marked slow")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--only", action="append", default=[], help="one command's table (repeatable)"
    )
    parser.add_argument(
        "--as-limit-mb",
        type=int,
        default=None,
        help="cap each command's address space (sweeping an old version that reads /dev/zero whole)",
    )
    args = parser.parse_args(argv)
    env = {"PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""),) if p)}
    if args.as_limit_mb:
        os.environ["EXPLORER_MEASURE_AS_MB"] = str(args.as_limit_mb)
    with tempfile.TemporaryDirectory(prefix="explorer-sweep-") as tmp:
        folder = make_bad_folder(Path(tmp))
        if env["PYTHONPATH"]:  # another checkout first, then the fixtures' modules
            env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(folder)])
        else:
            env = {}
        jobs = [
            (cmd, case)
            for cmd, cases in TABLES.items()
            if not args.only or cmd in args.only
            for case in cases
            if args.slow or not case.marks
        ]
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda job: _verdict(job[0], job[1], folder, env), jobs))
    print(f"{'command':14} {'tried':>6} {'exit 2, one line':>17} {'names it':>9} {'in bounds':>10}")
    total = [0, 0, 0, 0]
    for cmd in TABLES:
        mine = [r for r in results if r[0] == cmd]
        if not mine:
            continue
        one = sum(1 for r in mine if r[1] in ("ok", "named", "one-line"))
        named = sum(1 for r in mine if r[1] in ("ok", "named"))
        bounded = sum(1 for r in mine if not any(" s, " in m and "MB" in m for m in r[3]))
        row = [len(mine), one, named, bounded]
        total = [a + b for a, b in zip(total, row)]
        print(f"{cmd:14} {row[0]:>6} {row[1]:>17} {row[2]:>9} {row[3]:>10}")
    print(f"{'all':14} {total[0]:>6} {total[1]:>17} {total[2]:>9} {total[3]:>10}")
    misses = [r for r in results if r[3]]
    for cmd, _, case, why in misses:
        print(f"  {cmd} {case.id}: {'; '.join(why)}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
