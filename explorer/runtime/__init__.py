"""Real executions: torch.distributed pipelines, torch_xla steps, the torch.compile probe.

Heavy packages (torch, torch_xla, deepspeed) are imported inside functions only, so that
importing this package, or listing the CLI commands, stays light.
"""

__all__: list[str] = []
