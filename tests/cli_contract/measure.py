"""Run a command and report its peak resident memory and CPU time: ``python measure.py REPORT_PATH CMD...``.

``wait4`` reports the larger of the child's own peak and the peak of the process it was forked
from (Linux records the old address space's high-water mark at ``exec``), so a child forked
straight from a large pytest worker would show the worker's memory. Forked from this small
script instead, the figure is the command's own. Its CPU time (user + system, its own and its
waited-for children's) is what the command cost, whatever else the machine was running: the
bound a test can keep on a busy machine, where wall time is not. Writes ``{"returncode",
"max_rss_mb", "cpu_s"}``.

``EXPLORER_MEASURE_AS_MB`` caps the command's address space (for sweeping an old version whose
reads of ``/dev/zero`` would otherwise take the shared machine's memory).
"""

import json
import os
import sys

report, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        cap = os.environ.get("EXPLORER_MEASURE_AS_MB")
        if cap:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (int(cap) * 2**20, int(cap) * 2**20))
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as fh:
    json.dump(
        {
            "returncode": os.waitstatus_to_exitcode(status),
            "max_rss_mb": usage.ru_maxrss / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime,
        },
        fh,
    )
