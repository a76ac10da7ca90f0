"""The pipeline product's commands (``schedule``, ``check``, ``fix``, ``run``) and its ``explorer read`` readers.

A module that registers a command exposes ``register(subparsers)``; the others parse or print
for those commands (schedule options, the sweep's words, the other engines' reports). What they
run or compute lives in the floors below: runtime, analysis, printout, views.
"""

__all__: list[str] = []
