"""DeepSpeed 0.8.1's real ``schedule.py`` (before the seed's fix), for the tests that need it.

0.8.1 cannot be installed beside torch 2.9, but ``make install`` downloads its source
distribution into the venv; its ``schedule.py`` needs only ``call_to_str`` from today's
DeepSpeed. One place fetches it, so the three test folders that use it cannot drift apart.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

TARBALL = Path(sys.prefix) / "sdists" / "deepspeed-0.8.1.tar.gz"
_MEMBER = "deepspeed-0.8.1/deepspeed/runtime/pipe/schedule.py"
#: The seed thread's class: 0.8.1's TrainSchedule with only the ``+ 1`` removed.
_SEEDFIX = (
    "from ds081.runtime.pipe.schedule import TrainSchedule\n\n\n"
    "class FixBufferTrainSchedule(TrainSchedule):\n"
    "    def num_pipe_buffers(self):\n"
    "        return max(2, min(self.stages - self.stage_id, self.micro_batches))\n"
)


def schedule_081_source() -> bytes:
    """The bytes of 0.8.1's ``schedule.py`` (downloaded once if ``make install`` did not)."""
    if not TARBALL.exists():
        TARBALL.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
             ":all:", "deepspeed==0.8.1", "-d", str(TARBALL.parent)],
            check=True,
        )  # fmt: skip
    with tarfile.open(TARBALL) as tf:
        return tf.extractfile(_MEMBER).read()


def write_ds081_package(root: Path) -> Path:
    """``root/ds081/runtime/pipe/schedule.py`` importable as ``ds081``, and ``root/seedfix.py``."""
    pipe = root / "ds081" / "runtime" / "pipe"
    pipe.mkdir(parents=True)
    for folder in (root / "ds081", root / "ds081" / "runtime", pipe):
        (folder / "__init__.py").write_text("")
    (root / "ds081" / "runtime" / "utils.py").write_text(
        "from deepspeed.runtime.utils import call_to_str  # noqa: F401\n"
    )
    (pipe / "schedule.py").write_bytes(schedule_081_source())
    (root / "seedfix.py").write_text(_SEEDFIX)
    return root


def import_schedule_081(folder: Path) -> ModuleType:
    """0.8.1's ``schedule.py`` imported under the installed package (its one relative import,
    ``call_to_str``, resolves to real DeepSpeed code); ``folder`` holds the file."""
    path = folder / "schedule_081.py"
    path.write_bytes(schedule_081_source())
    spec = importlib.util.spec_from_file_location(
        "deepspeed.runtime.pipe.schedule_081", path, submodule_search_locations=None
    )
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "deepspeed.runtime.pipe"
    spec.loader.exec_module(module)
    return module


def without_plus_one(train_schedule: type) -> type:
    """The seed's FixBufferTrainSchedule: only the ``+1`` removed from num_pipe_buffers."""

    class FixBufferTrainSchedule(train_schedule):
        def num_pipe_buffers(self):
            return max(2, min(self.stages - self.stage_id, self.micro_batches))

    return FixBufferTrainSchedule
