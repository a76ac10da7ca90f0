"""Records of torch.compile's compiles, ours or read from a TORCH_TRACE folder, and the readers that build them."""

__all__: list[str] = []
