"""A stage's backward from a received gradient is bit for bit the one DeepSpeed's call gives.

``StageState`` enters the gradient as ``sum(out * grad)`` instead of
``torch.autograd.backward(out, grad_tensors=grad)`` (that call imports sympy to check the
gradient's shape: 0.4-0.5 s of CPU per rank). Here both are run on the same small graphs, with
non-finite values and signed zeros in the gradient, with ``inputs=`` and a retained graph as
the zero-bubble split runs them, and the gradients compared bit for bit.
"""

from __future__ import annotations

import pytest
import torch

from explorer.pipeline.runtime.stage_state import _backward


def _graph(seed: int):
    torch.manual_seed(seed)
    layer = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4))
    x = torch.randn(3, 6, requires_grad=True)
    return layer, x, layer(x)


def _grads(layer, x) -> list[torch.Tensor]:
    return [t.grad.clone() for t in (x, *layer.parameters())]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("special", ["none", "signed zeros", "nan and inf"])
def test_the_gradients_are_bitwise_those_of_autograd_backward(seed, special):
    grad = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed + 100))
    if special == "signed zeros":
        grad[0] = -0.0
        grad[1] = 0.0
    elif special == "nan and inf":
        grad[0, 0], grad[1, 1], grad[2, 2] = float("nan"), float("inf"), float("-inf")
    layer, x, out = _graph(seed)
    torch.autograd.backward(out, grad_tensors=grad)
    direct = _grads(layer, x)
    layer, x, out = _graph(seed)
    _backward(out, grad)
    ours = _grads(layer, x)
    for a, b in zip(direct, ours):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))  # every bit, NaN included


def test_input_then_weight_with_a_retained_graph_is_bitwise_the_same():
    grad = torch.randn(3, 4, generator=torch.Generator().manual_seed(7))
    layer, x, out = _graph(1)
    torch.autograd.backward(out, grad_tensors=grad, inputs=[x], retain_graph=True)
    torch.autograd.backward(out, grad_tensors=grad, inputs=list(layer.parameters()))
    direct = _grads(layer, x)
    layer, x, out = _graph(1)
    _backward(out, grad, inputs=[x], retain_graph=True)
    _backward(out, grad, inputs=list(layer.parameters()))
    for a, b in zip(direct, _grads(layer, x)):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))


@pytest.mark.parametrize("grad", [torch.ones(4), torch.ones(1, 4)], ids=["shape", "broadcastable"])
def test_a_gradient_of_another_shape_is_refused_not_broadcast(grad):
    _, _, out = _graph(0)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        torch.autograd.backward(out, grad_tensors=grad)  # what torch says
    _, _, out = _graph(0)
    with pytest.raises(RuntimeError, match="Mismatch in the gradient received"):
        _backward(out, grad)


def test_a_gradient_of_another_dtype_is_converted_as_torch_converts_it():
    grad = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    layer, x, out = _graph(2)
    torch.autograd.backward(out, grad_tensors=grad)
    direct = _grads(layer, x)
    layer, x, out = _graph(2)
    _backward(out, grad)
    for a, b in zip(direct, _grads(layer, x)):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))
