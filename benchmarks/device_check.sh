#!/usr/bin/env bash
# The GPU path, checked on a machine with a CUDA device, offline, in under 8 minutes.
#
#   bash benchmarks/device_check.sh            # from the repository's root
#
# Needs: python3 with torch (CUDA) and pytest; nothing installed from the network. The project's
# own code goes on PYTHONPATH. DeepSpeed (and the wheels it needs that such a machine lacks) may
# lie as wheels in .whl/ (see the README's "Checking the GPU path"): they are installed into a
# scratch folder, never into the machine's python. Writes its log and the tests' JUnit file to
# $OUT (or ./device-check-out); exits 0 only when every part passed.
#
# What it proves, each part on the real device:
#   1. the gpu tests (tests/*/test_*_gpu.py): the explorer's engine at world size 1 over NCCL and
#      with four ranks sharing the GPU over gloo, bitwise equal to a reference trained on the same
#      GPU; the seed's schedule failing at rank 2 / step 6 on CUDA; a fault on CUDA written with
#      every step timed before it; the CUDA clock against a GPU sleep of known length; DeepSpeed's
#      engine on one GPU; the compile probe's times including the GPU's work (inductor, Triton);
#   2. the GPU path's pure logic (tests/pipeline/test_gpu_path_on_cpu.py) under this torch;
#   3. one `explorer run` as a user types it, its verdict and its result file printed.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/device-check-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
LOG="$OUT/device_check.log"
exec > >(tee "$LOG") 2>&1
export PYTHONUNBUFFERED=1
failed=()

section() { echo; echo "== $* ($(date -u +%H:%M:%S))"; }

section "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" - <<'EOF'
import platform, torch
print("python", platform.python_version(), "| torch", torch.__version__, "| CUDA", torch.version.cuda)
print("GPUs:", torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
print("NCCL:", torch.distributed.is_nccl_available(), torch.cuda.nccl.version() if torch.cuda.is_available() else None)
EOF

if compgen -G ".whl/*.whl" > /dev/null; then
    section "wheels carried in .whl/ (installed into /tmp/device-check-site)"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/device-check-site .whl/*.whl && export PYTHONPATH="/tmp/device-check-site"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import deepspeed; print('deepspeed', deepspeed.__version__)" 2>&1 | tail -1

section "1. the gpu tests"
GPU_TESTS=$(grep -rl --include='test_*.py' 'pytest.mark.gpu\b' tests | tr '\n' ' ')
timeout 420 "$PY" -m pytest -m gpu -rs -p no:cacheprovider -n 4 -q --junitxml="$OUT/gpu_tests.xml" \
    --durations=0 $GPU_TESTS || failed+=("gpu tests")

section "2. the GPU path's logic under this torch"
timeout 120 "$PY" -m pytest -p no:cacheprovider -q tests/pipeline/test_gpu_path_on_cpu.py \
    || failed+=("gpu path logic")

section "3. explorer run, four ranks sharing the GPU over gloo"
rm -rf "$OUT/run"
timeout 180 "$PY" -m explorer run --kind 1f1b --stages 4 --microbatches 8 --iterations 2 \
    --backend gloo --device cuda --out "$OUT/run" || failed+=("explorer run")
"$PY" - "$OUT/run" <<'EOF' || failed+=("run summary")
import json, statistics, sys
from pathlib import Path
folder = Path(sys.argv[1])
result = json.loads((folder / "result.json").read_text())
keys = ("bitwise_equal_to_reference", "max_abs_diff_to_reference", "reference_device", "tolerance")
print({k: result[k] for k in keys})
rows = [json.loads(x) for p in folder.glob("rank*.jsonl") for x in p.read_text().splitlines()]
timed = [r for r in rows if r.get("type") == "instr" and r["iteration"] == 1]
for kind in ("ForwardPass", "BackwardPass", "SendActivation", "RecvActivation"):
    ms = [1e3 * (r["end"] - r["start"]) for r in timed if r["instruction"].startswith(kind)]
    if ms:
        print(f"{kind}: median {statistics.median(ms):.3f} ms over {len(ms)} (CUDA events)")
starts = sorted((r["rank"], r["device"]) for r in rows if r.get("type") == "start")
print("ranks on", starts)
# Why the reference trains on the run's device: the same model trained on the CPU.
from explorer.pipeline.runtime.models import build_model
from explorer.pipeline.runtime.reference import train_reference
from explorer.pipeline.runtime.spec import RunSpec
spec = RunSpec.read(folder)
cpu = train_reference(build_model(spec.model, 4, spec.microbatch_size, spec.seed), 2, 8)
gpu = result["reference_losses"]
diff = max(abs(float(a) - b) for a, b in zip(cpu.losses[-1], gpu))
print(f"a CPU reference against the GPU one: losses bitwise equal {diff == 0.0}, max |diff| {diff:.3g}")
sys.exit(0 if result["bitwise_equal_to_reference"] else 1)
EOF

section "verdict"
if [ ${#failed[@]} -eq 0 ]; then
    echo "device check: every part passed"
    exit 0
fi
echo "device check: FAILED: ${failed[*]}"
exit 1
