"""Regenerate the HLO fixtures with real torch_xla 2.9 on the PJRT CPU device.

The HLO tests must run without torch_xla, so the modules they read are committed; this script
is how they were made, so anyone can check that they are what torch_xla really prints. Each
scenario runs in its own child process because torch_xla reads its debug environment
variables (``XLA_SAVE_TENSORS_FILE``, ``XLA_FLAGS``) once per process.

    PJRT_DEVICE=CPU python tests/data/hlo/make_fixtures.py            # small fixtures
    PJRT_DEVICE=CPU python tests/data/hlo/make_fixtures.py --large 64 # + the 35k benchmark pair

Scenarios (files written next to this script):

- ``scalar_save.hlo.txt``: ``XLA_SAVE_TENSORS_FILE`` output (torch_xla's print form, inline
  operand shapes, metadata with source lines) of ``a*0.5 + a*0.25`` then ``a*0.5 + a*0.5``:
  Python scalars become parameters and equal ones are shared, so the count goes 3 -> 2.
- ``order_a.hlo.txt`` / ``order_b.hlo.txt``: ``--xla_dump_to`` before-optimizations dumps (bare
  operand names) of the same two results made in the opposite order: the live-tensor order
  decides the parameter order (and the output tuple order), the recompile in the seed issue.
- ``order_a.after_opt.hlo.txt``: XLA's optimized form of the first (fusion, ``calls=``).
- ``added_save.hlo.txt``: an MLP training step, then the same step that also computes a
  gradient norm for logging: the "additional computation" of the seed issue.
- ``encoder_step1/2.hlo.txt.gz``: a small transformer encoder trained with SGD momentum; step 1
  creates the momentum buffers, step 2 is the steady step, so the two graphs differ for real.
- ``--large 64``: ``encoder_large_step1/2.hlo.txt.gz``, the first and steady step of a 64-layer
  encoder (about 35,000 instructions each) taken before compilation, for the benchmark.
"""

from __future__ import annotations

import argparse
import copy
import glob
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _scalar() -> None:
    import torch
    import torch_xla

    dev = torch_xla.device()
    a = torch.arange(4, dtype=torch.float32).to(dev)
    c = a * 0.5 + a * 0.25
    torch_xla.sync()
    c = a * 0.5 + a * 0.5
    torch_xla.sync()
    del c


def _order() -> None:
    import torch
    import torch_xla

    dev = torch_xla.device()
    a = torch.arange(4, dtype=torch.float32).to(dev)
    b = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(dev)
    u = a * 2.5
    v = (b * 1.5).sum(dim=0)
    torch_xla.sync()
    del u, v
    v = (b * 1.5).sum(dim=0)
    u = a * 2.5
    torch_xla.sync()  # the same two results, created in the other order: live while it syncs
    del u, v


def _mlp(extra_norm: bool) -> None:
    import torch
    import torch_xla

    torch.manual_seed(0)
    dev = torch_xla.device()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(
        dev
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 8).to(dev)
    y = torch.randn(5, 4).to(dev)
    for step in range(2):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if extra_norm and step == 1:
            norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
        opt.step()
        torch_xla.sync()
    if extra_norm:
        del norm


def _added() -> None:
    _mlp(extra_norm=False)
    _mlp(extra_norm=True)


def _encoder(layers: int) -> None:
    import torch
    import torch_xla

    torch.manual_seed(0)
    dev = torch_xla.device()
    layer = torch.nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
    )
    model = torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False).to(
        dev
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(2, 8, 32).to(dev)
    torch_xla.sync()
    for _ in range(2):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        torch_xla.sync()


def _encoder_hlo(layers: int) -> None:
    """First and steady SGD-momentum step of a deep encoder, as HLO text, without compiling.

    Compiling a 35,000-instruction graph with XLA:CPU took over 18 GB here, so the large pair
    is taken from ``_get_xla_tensors_hlo`` (the pending graph, as torch_xla prints it) and the
    steady step's momentum buffers are transferred from the CPU instead of computed on device.
    """
    import torch
    import torch_xla

    torch.manual_seed(0)
    dev = torch_xla.device()
    layer = torch.nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
    )
    cpu_model = torch.nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    x = torch.randn(2, 8, 32)
    texts = []
    for steady in (False, True):
        model = copy.deepcopy(cpu_model).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        if steady:
            for p in model.parameters():
                opt.state[p]["momentum_buffer"] = torch.zeros(p.shape).to(dev)
        loss = model(x.to(dev)).pow(2).mean()
        loss.backward()
        opt.step()
        live = [loss] + [p for p in model.parameters()]
        live += [opt.state[p]["momentum_buffer"] for p in model.parameters()]
        texts.append(torch_xla._XLAC._get_xla_tensors_hlo(live))
    for name, text in zip(("step1", "step2"), texts):
        with gzip.open(
            os.path.join(HERE, f"encoder_large_{name}.hlo.txt.gz"), "wt", compresslevel=9
        ) as fh:
            fh.write(text)


def _child(scenario: str, layers: int) -> None:
    if scenario == "scalar":
        _scalar()
    elif scenario == "order":
        _order()
    elif scenario == "added":
        _added()
    elif scenario == "encoder":
        _encoder(layers)
    elif scenario == "encoder_hlo":
        _encoder_hlo(layers)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")


def _run(scenario: str, env_extra: dict[str, str], layers: int = 2) -> None:
    env = dict(os.environ, PJRT_DEVICE="CPU", **env_extra)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", scenario, "--layers", str(layers)]
    subprocess.run(cmd, env=env, check=True)


def _save_file(scenario: str, dest: str, layers: int = 2) -> str:
    """Run a scenario with XLA_SAVE_TENSORS_FILE and return the text it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "save.txt")
        _run(
            scenario,
            {
                "XLA_SAVE_TENSORS_FILE": target,
                "XLA_SAVE_TENSORS_FMT": "hlo",
                "XLA_IR_DEBUG": "1",
                "XLA_HLO_DEBUG": "1",
            },
            layers,
        )
        # torch_xla appends the device ordinal to the file name.
        (written,) = glob.glob(target + "*")
        with open(written) as fh:
            text = fh.read()
    if dest:
        with open(dest, "w") as fh:
            fh.write(text)
    return text


def _dumps(scenario: str) -> list[str]:
    """Run a scenario with --xla_dump_to and return its before/after-optimization files."""
    tmp = tempfile.mkdtemp()
    _run(scenario, {"XLA_FLAGS": f"--xla_dump_to={tmp} --xla_dump_hlo_module_re=SyncTensorsGraph"})
    return sorted(glob.glob(os.path.join(tmp, "*SyncTensorsGraph*optimizations.txt")))


def _modules(text: str) -> list[str]:
    """The module texts of a save file (kept dependency-free on purpose: no explorer import)."""
    out, cur = [], None
    for line in text.splitlines(keepends=True):
        if line.startswith("HloModule "):
            cur = [line]
        elif cur is not None and line.startswith("Graph Hash:"):
            out.append("".join(cur).rstrip() + "\n")
            cur = None
        elif cur is not None:
            cur.append(line)
    return out


def _encoder_pair(layers: int, stem: str) -> None:
    text = _save_file("encoder", "", layers)
    modules = sorted(_modules(text), key=len)
    step1, step2 = modules[-2], modules[-1]  # the two training-step graphs are the largest
    for name, body in ((f"{stem}_step1.hlo.txt.gz", step1), (f"{stem}_step2.hlo.txt.gz", step2)):
        with gzip.open(os.path.join(HERE, name), "wt", compresslevel=9) as fh:
            fh.write(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument(
        "--large",
        type=int,
        default=0,
        metavar="LAYERS",
        help="also make the benchmark pair with this many layers (64 gives ~35k instructions)",
    )
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.layers)
        return
    _save_file("scalar", os.path.join(HERE, "scalar_save.hlo.txt"))
    _save_file("added", os.path.join(HERE, "added_save.hlo.txt"))
    files = _dumps("order")
    before = [f for f in files if f.endswith("before_optimizations.txt")]
    after = [f for f in files if f.endswith("after_optimizations.txt")]
    shutil.copy(before[0], os.path.join(HERE, "order_a.hlo.txt"))
    shutil.copy(before[1], os.path.join(HERE, "order_b.hlo.txt"))
    shutil.copy(after[0], os.path.join(HERE, "order_a.after_opt.hlo.txt"))
    _encoder_pair(2, "encoder")
    if args.large:
        _run("encoder_hlo", {"XLA_IR_DEBUG": "1", "XLA_HLO_DEBUG": "1"}, args.large)


if __name__ == "__main__":
    main()
