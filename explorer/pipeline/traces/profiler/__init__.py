"""A real ``torch.distributed.pipelining`` job's profiler traces: one Chrome trace per rank, read back as placed actions."""

__all__: list[str] = []
