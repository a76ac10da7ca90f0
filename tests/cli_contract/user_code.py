"""Users' modules for the bad-input tables: schedule classes, models and steps that misbehave.

Each entry is written as ``<name>.py`` into the folder the tests put on ``PYTHONPATH``. The
schedule classes follow DeepSpeed's shape (constructor ``(micro_batches, stages, stage_id)``,
``steps()``, ``num_pipe_buffers()``) and use DeepSpeed's instruction class names.
"""

from __future__ import annotations

_INSTRUCTIONS = """
class _Cmd:
    def __init__(self, buffer_id=None):
        self.buffer_id = buffer_id
class LoadMicroBatch(_Cmd): pass
class ForwardPass(_Cmd): pass
class BackwardPass(_Cmd): pass
class OptimizerStep(_Cmd): pass
class Wobble(_Cmd): pass
"""


def _schedule(steps_body: str, buffers: str = "1", top: str = "", init: str = "") -> str:
    return f"""{top}
{_INSTRUCTIONS}
class Sched:
    def __init__(self, micro_batches, stages, stage_id):
        self.micro_batches, self.stages, self.stage_id = micro_batches, stages, stage_id
        {init or "pass"}
    def steps(self):
{steps_body}
    def num_pipe_buffers(self):
        return {buffers}
"""


_GOOD_STEPS = """        for _ in range(self.micro_batches):
            yield [LoadMicroBatch(0), ForwardPass(0), BackwardPass(0)]
        yield [OptimizerStep()]"""

MODULES: dict[str, str] = {
    "sched_ok": _schedule(_GOOD_STEPS),
    "sched_buf_abc": _schedule("        yield [LoadMicroBatch('abc'), ForwardPass('abc')]"),
    "sched_buf_nan": _schedule("        yield [LoadMicroBatch(float('nan')), ForwardPass(0)]"),
    "sched_buf_huge": _schedule("        yield [LoadMicroBatch(10**30), ForwardPass(0)]"),
    "sched_buf_float": _schedule("        yield [LoadMicroBatch(0.5), ForwardPass(0)]"),
    "sched_buf_beyond": _schedule("        yield [LoadMicroBatch(5), ForwardPass(5)]"),
    "sched_buf_negative": _schedule("        yield [LoadMicroBatch(-1), ForwardPass(-1)]"),
    "sched_nbuf_negative": _schedule(_GOOD_STEPS, buffers="-1"),
    "sched_nbuf_zero": _schedule(_GOOD_STEPS, buffers="0"),
    "sched_nbuf_str": _schedule(_GOOD_STEPS, buffers="'two'"),
    "sched_nbuf_nan": _schedule(_GOOD_STEPS, buffers="float('nan')"),
    "sched_nbuf_huge": _schedule(_GOOD_STEPS, buffers="10**30"),
    "sched_nbuf_raises": _schedule(_GOOD_STEPS, buffers="1 // 0"),
    "sched_infinite": _schedule("        while True:\n            yield [ForwardPass(0)]"),
    "sched_infinite_empty": _schedule("        while True:\n            yield []"),
    "sched_yields_nothing": _schedule("        yield []"),
    "sched_no_steps": _schedule("        return iter(())"),
    "sched_infinite_step": _schedule(
        "        import itertools\n        yield (ForwardPass(0) for _ in itertools.count())"
    ),
    "sched_exit": _schedule("        import sys\n        sys.exit(3)\n        yield []"),
    "sched_os_exit": _schedule("        import os\n        os._exit(3)\n        yield []"),
    "sched_keyboard": _schedule("        raise KeyboardInterrupt\n        yield []"),
    "sched_segfault": _schedule(
        "        import ctypes\n        ctypes.string_at(0)\n        yield []"
    ),
    "sched_sleeps": _schedule("        import time\n        time.sleep(3600)\n        yield []"),
    "sched_raises": _schedule("        raise RuntimeError('bad schedule')\n        yield []"),
    "sched_not_iterable": _schedule("        return 5"),
    "sched_step_not_iterable": _schedule("        yield 5"),
    "sched_unknown_instr": _schedule("        yield [Wobble(0)]"),
    "sched_init_raises": _schedule(_GOOD_STEPS, init="raise ValueError('no such stage')"),
    "sched_prints": _schedule("        print('hello from steps')\n" + _GOOD_STEPS),
    "sched_long_message": _schedule("        raise ValueError('x' * 100000)\n        yield []"),
    "sched_newlines": _schedule(
        "        raise ValueError('line one\\nline two\\nline three')\n        yield []"
    ),
    "import_raises": "raise RuntimeError('broken at import')\n",
    "import_exit": "import sys\nsys.exit(4)\n",
    "import_keyboard": "raise KeyboardInterrupt\n",
    "syntax_error": "def broken(:\n    pass\n",
    "not_a_class": "Sched = 42\ndef step(i):\n    pass\ndef model():\n    return 1\n",
    "step_exit": "import sys\ndef step(i):\n    if i == 1:\n        sys.exit(3)\n",
    "step_os_exit": "import os\ndef step(i):\n    if i == 1:\n        os._exit(3)\n",
    # the probe's own exit codes, from the user's code: never its verdict
    "step_exit0": "import sys\ndef step(i):\n    if i == 1:\n        sys.exit(0)\n",
    "step_exit2": "import sys\ndef step(i):\n    if i == 1:\n        sys.exit(2)\n",
    # the probe's own end line, written by the user's code before it ends the process
    "step_says_done": "import os, sys\ndef step(i):\n    if i == 1:\n        sys.stderr.write("
    "'explorer compile-probe: verdict printed, exit 0\\n')\n        sys.stderr.flush()\n"
    "        os._exit(0)\n",
    "step_says_error": "import os, sys\ndef step(i):\n    if i == 1:\n        sys.stderr.write("
    "'explorer compile-probe: error: fake\\n')\n        sys.stderr.flush()\n        os._exit(2)\n",
    "step_keyboard": "def step(i):\n    if i == 1:\n        raise KeyboardInterrupt\n",
    "step_segfault": "import ctypes\ndef step(i):\n    if i == 1:\n        ctypes.string_at(0)\n",
    "step_sleeps": "import time\ndef step(i):\n    time.sleep(3600)\n",
    "step_no_args": "def step():\n    pass\n",
    # prints at import and in every iteration, as a user's loop does
    "step_chatty": "print('loaded')\ndef step(i):\n    print('iteration', i)\n",
    # calling either runs none of its body: "No period: 0 compiles", exit 0
    "step_async": "async def step(i):\n    pass\n",
    "step_generator": "def step(i):\n    yield i\n",
    "model_exit": "import sys\ndef build():\n    sys.exit(3)\n",
    "model_keyboard": "def build():\n    raise KeyboardInterrupt\n",
    "model_segfault": "import ctypes\ndef build():\n    ctypes.string_at(0)\n",
}
