"""Read Dynamo's cache: which variant each frame used last, and how variants' guards differ.

Every compiled frame keeps a list of cache entries (one per variant, each with its
``compile_id`` and its guards). Dynamo moves the entry that matched to the front, so the
front entry is the variant that ran most recently: this works for any backend, including a
user's own ``torch.compile`` call the probe never saw. The guard lists
(``guard_manager.code_parts``) of the variants of one frame, minus what they all share, are
exactly what tells the variants apart (``L['s'].mode == 0`` against ``== 1``).
"""

from __future__ import annotations

from typing import Any, Iterator

from explorer.compile.traces.records import VariantGuards, frame_of


def _codes() -> Iterator[Any]:
    """The code objects Dynamo has processed (weak references: some may be gone)."""
    from torch._dynamo import convert_frame

    tracker = getattr(convert_frame, "input_codes", None)
    for ref in list(getattr(tracker, "seen", ())):
        code = ref()
        if code is not None:
            yield code


def _entries(code: Any) -> list[Any]:
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    try:
        return list(_debug_get_cache_entry_list(code))
    except Exception:  # a code object Dynamo no longer tracks
        return []


def supported() -> bool:
    """True when this torch exposes cache entries with compile ids."""
    try:
        from torch._dynamo import convert_frame, eval_frame
    except ImportError:  # pragma: no cover
        return False
    return hasattr(convert_frame, "input_codes") and hasattr(
        eval_frame, "_debug_get_cache_entry_list"
    )


def front_variants() -> dict[str, str]:
    """Frame -> compile id of the variant at the front of its cache (the last one that ran)."""
    fronts: dict[str, str] = {}
    for code in _codes():
        entries = _entries(code)
        if entries:
            cid = str(entries[0].compile_id)
            fronts[frame_of(cid)] = cid
    return fronts


def guard_differences() -> list[VariantGuards]:
    """For each frame with several variants: the guards each variant holds that not all share."""
    out: list[VariantGuards] = []
    for code in _codes():
        entries = _entries(code)
        if len(entries) < 2:
            continue
        parts = {
            str(e.compile_id): list(getattr(e.guard_manager, "code_parts", []) or [])
            for e in entries
        }
        shared = set.intersection(*(set(p) for p in parts.values()))
        for cid in sorted(parts, key=_order):
            only = tuple(p for p in parts[cid] if p not in shared)
            out.append(VariantGuards(cid, code.co_name, only))
    return sorted(out, key=lambda v: _order(v.compile_id))


def _order(compile_id: str) -> tuple[int, ...]:
    """Sort ``1/10`` after ``1/9``."""
    try:
        return tuple(int(x) for x in compile_id.replace("_", "/").split("/"))
    except ValueError:
        return (1 << 30,)


__all__ = ["supported", "front_variants", "guard_differences"]
