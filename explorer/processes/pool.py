"""Read many files on every core, in order, with a progress bar; Ctrl-C keeps what came back.

Every product reads jobs of thousands of rank files (a pipeline job's rank files, a compile
job's ``TORCH_TRACE`` logs). The reading differs; the way it is spread over processes does not,
so it is written once here: the files are cut into chunks, each chunk is read in a worker
process started with ``spawn`` (nothing of a notebook's threads or a parent's locks is copied),
and the results come back in the order of the files, so the answer is the same as one process's.

The reader is sent to each worker once (the pool's initializer), not with every chunk: a reader
that carries a table (a compile job's map of profiler traces) is pickled once per worker.
A Ctrl-C cancels the chunks not yet started; the caller keeps what came back and says so.
Light: the standard library only.
"""

from __future__ import annotations

import gc
import sys
from typing import Any, Callable, Generator, Optional, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: ``progress(files done, files in all)`` after each file.
Progress = Callable[[int, int], None]

#: Files per task: small enough to keep every worker busy to the end and the progress moving,
#: large enough that a task's overhead (one pickle each way) is noise beside its reading.
CHUNK = 16

_reader: Optional[Callable[[Any], Any]] = None


def _install(read: Callable[[Any], Any]) -> None:
    """A worker's initializer: the reader every chunk of this worker is read with."""
    global _reader
    _reader = read
    gc.disable()  # each file's objects are freed by reference counting; collections halve the speed


def _read_chunk(items: Sequence[Any]) -> list[Any]:
    """A worker's share: its items read in order (module level, so the pool can call it)."""
    read = _reader
    assert read is not None, "the pool's initializer installs the reader"
    return [read(item) for item in items]


def in_order(
    read: Callable[[T], R], items: Sequence[T], workers: int = 1, chunk: int = CHUNK
) -> Generator[R, None, None]:
    """``read(item)`` for each item, in order, in ``workers`` processes (this one when 1).

    ``read`` must be picklable when ``workers`` > 1 (a module-level function, or a frozen
    dataclass's bound method). Closing the generator early (a Ctrl-C in the caller's loop)
    cancels what has not started."""
    if workers <= 1:
        yield from map(read, items)
        return
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    chunks = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=get_context("spawn"),
        initializer=_install,
        initargs=(read,),
    )
    try:
        futures = [pool.submit(_read_chunk, c) for c in chunks]
        for future in futures:
            yield from future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def stderr_progress(what: str) -> Optional[Progress]:
    """A one-line progress bar on stderr (``reading <what>: 517/4096``), None when stderr is no
    terminal (a pipe or a log file gets no carriage returns)."""
    if not sys.stderr.isatty():
        return None

    def progress(done: int, total: int) -> None:
        if done == total or done % max(1, total // 100) == 0:
            sys.stderr.write(f"\rreading {what}: {done}/{total}")
            if done == total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    return progress


__all__ = ["CHUNK", "Progress", "in_order", "stderr_progress"]
