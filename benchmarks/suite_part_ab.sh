#!/usr/bin/env bash
# Some of the suite's test files from this checkout and from another one (BASE), alternating,
# 2 rounds: the wall time and the CPU of the whole process tree (pytest, its workers and every
# process the tests start), as /usr/bin/time counts it. Side by side, because this machine's
# speed drifts by a fifth within an hour: two full-suite runs an hour apart compare nothing.
#   bash benchmarks/suite_part_ab.sh /path/to/base/checkout [test files...]
# Default files: the pipeline tests that launch the most ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=$(pwd)
BASE=$(realpath "$1")
shift
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  FILES=(tests/pipeline/test_pipeline_runtime.py tests/pipeline/test_pipeline_faults.py
         tests/pipeline/test_pipeline_cli.py tests/pipeline/test_pipeline_contract.py
         tests/pipeline/test_torch_engine_folder.py)
fi
for round in 1 2; do
  for dir in "$BASE" "$HERE"; do
    (cd "$dir" && /usr/bin/time -f "$dir round $round: %e s wall, %U s user + %S s system" \
      "$HERE/.venv/bin/python" -m pytest -n 2 -q -p no:randomly -p no:cacheprovider "${FILES[@]}" 2>&1 | tail -2)
  done
done
