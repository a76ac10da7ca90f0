"""The pipeline product's commands (``schedule``, ``check``, ``fix``, ``run``) and its ``explorer read`` readers.

A module that registers a command exposes ``register(subparsers)``; the others are the parts
those commands share (schedule options, the sweep's worker pool, the run folder).
"""

__all__: list[str] = []
