"""The user's mesh (``--mesh pp=8,dp=128``): how a job's ranks are numbered, when the user says it.

A job's folder says its pipeline (``spec.json``) but not always how its ranks were numbered:
``explorer run``'s copies put a replica's pipeline on consecutive ranks, DeepSpeed and
torchtitan's ``(pp, dp)`` mesh put a stage's replicas there. The instrument's start lines say
it (:func:`~explorer.pipeline.traces.job_folder.instrument_layout`); a folder of the engine's
rank files or of profiler traces copied from another launcher does not. The user's mesh is
read as ``torch.distributed.device_mesh.init_device_mesh`` reads its shape: dimensions
outermost first, so ``pp=8,dp=128`` numbers rank = pp index x 128 + dp index (pipe-major) and
``dp=128,pp=8`` numbers rank = dp index x 8 + pp index (replica-major).

Only ``pp`` and ``dp`` are laid out: a tensor- or expert-parallel dimension would put several
ranks on one (stage, replica), which the fold does not band yet; it is refused by name. The
folder is checked against the mesh where it is laid out
(:func:`~explorer.pipeline.traces.job_folder.layout`). Pure: no numpy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from explorer.errors import InputError, excerpt

#: How a job numbers its ranks: ``explorer run``'s copies and PyTorch's ``(dp, pp)`` meshes put
#: a replica's pipeline on consecutive ranks (rank = replica x P + pipeline rank); DeepSpeed's
#: ``PipeDataParallelTopology`` and torchtitan's ``(pp, dp)`` mesh put a stage's replicas there
#: (rank = pipeline rank x D + replica).
REPLICA_MAJOR, PIPE_MAJOR = "replica-major", "pipe-major"
#: The most ranks a mesh may name (far beyond any job's rank files a folder can hold).
MAX_RANKS = 1 << 24
_PART = re.compile(r"\s*([A-Za-z_]+)\s*=\s*(\d{1,9})\s*")
_NOT_YET = {"tp", "ep", "cp", "sp", "fsdp"}
EXAMPLE = "--mesh pp=8,dp=128 (DeepSpeed's and torchtitan's numbering) or --mesh dp=128,pp=8"


@dataclass(frozen=True)
class Mesh:
    """``pp`` pipeline ranks, ``dp`` data-parallel replicas, numbered per ``order``."""

    pp: int
    dp: int
    order: str

    @property
    def ranks(self) -> int:
        return self.pp * self.dp

    def spelled(self) -> str:
        """As the user wrote it (dimensions outermost first)."""
        dims = [f"pp={self.pp}", f"dp={self.dp}"]
        return ",".join(dims if self.order == PIPE_MAJOR else dims[::-1])


def parse_mesh(text: str) -> Mesh:
    """``pp=P,dp=D`` or ``dp=D,pp=P``; an InputError naming the constraint otherwise."""
    parts = text.split(",")
    sizes: dict[str, int] = {}
    for part in parts:
        m = _PART.fullmatch(part)
        if m is None:
            raise InputError(f"--mesh takes NAME=SIZE pairs, e.g. {EXAMPLE}; got {excerpt(text)}")
        name, size = m.group(1).lower(), int(m.group(2))
        if name in _NOT_YET:
            raise InputError(
                f"--mesh {name}={size}: only pp and dp are laid out (a {name} dimension puts several "
                f"ranks on one stage and replica, which the fold does not band yet); give {EXAMPLE}"
            )
        if name not in ("pp", "dp"):
            raise InputError(f"--mesh names pp and dp, not {excerpt(name)}: e.g. {EXAMPLE}")
        if name in sizes:
            raise InputError(f"--mesh names {name} twice: e.g. {EXAMPLE}")
        if size < 1:
            raise InputError(f"--mesh {name} must be at least 1; got {size}")
        sizes[name] = size
    if set(sizes) != {"pp", "dp"}:
        missing = "pp" if "pp" not in sizes else "dp"
        raise InputError(f"--mesh needs both pp and dp ({missing} is missing): e.g. {EXAMPLE}")
    mesh = Mesh(sizes["pp"], sizes["dp"], PIPE_MAJOR if list(sizes)[0] == "pp" else REPLICA_MAJOR)
    if mesh.ranks > MAX_RANKS:
        raise InputError(
            f"--mesh {mesh.spelled()} names {mesh.ranks:,} ranks, more than the {MAX_RANKS:,} "
            "a job's folder can hold: check the sizes"
        )
    return mesh


__all__ = ["EXAMPLE", "MAX_RANKS", "PIPE_MAJOR", "REPLICA_MAJOR", "Mesh", "parse_mesh"]
