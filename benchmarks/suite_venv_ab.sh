#!/usr/bin/env bash
# The same test files in two checkouts of one tree, each run by its own .venv, alternating, 2
# rounds: the wall time and the CPU of the whole process tree (pytest, its workers and every
# process the tests start), as /usr/bin/time counts it. For what only the environment changes,
# such as the interpreter the venv was made from:
#   git clone . /tmp/a && make -C /tmp/a install PYTHON=/root/.pyenv/versions/3.11.7/bin/python3
#   git clone . /tmp/b && make -C /tmp/b install PYTHON=/usr/bin/python3.11
#   bash benchmarks/suite_venv_ab.sh /tmp/a /tmp/b [test files or pytest options...]
# Side by side, because this machine's speed drifts by a fifth within an hour. Default: the fast
# tier (`-m "not slow"`, in-process Python) and five files that start processes.
set -euo pipefail
A=$(realpath "$1")
B=$(realpath "$2")
shift 2
ARGS=("$@")
if [ ${#ARGS[@]} -eq 0 ]; then
  ARGS=(-m "not slow")
fi
for round in 1 2; do
  for dir in "$A" "$B"; do
    version=$("$dir/.venv/bin/python" -c 'import sys; print(sys.version.split()[0], sys.executable)')
    (cd "$dir" && /usr/bin/time -f "$dir ($version) round $round: %e s wall, %U s user + %S s system" \
      .venv/bin/python -m pytest -n 3 -q -p no:randomly -p no:cacheprovider "${ARGS[@]}" 2>&1 | tail -2)
  done
done
