"""Make the held-out HLO benchmark pairs: real torch_xla modules of ~35,000 instructions.

A 64-layer transformer encoder's SGD-momentum training step, traced by real torch_xla 2.9 on the
PJRT CPU device, and the same step where one layer in the middle uses GELU instead of ReLU. The
change sits in the middle of the program, so the canonical texts are not one long insertion
apart: every instruction after it is renumbered and ``difflib`` has to work for its answer.

XLA writes ``*.before_optimizations.txt`` when it starts compiling; compiling a graph this size
on XLA:CPU takes many GB and minutes, and the benchmark needs only the text, so the child is
stopped once the dump file is complete. The files land in ``benchmarks/data/`` (ignored by git)
and are reused when present.

The second pair is another model and another optimizer, in the other situation the issue names:
the first and the steady AdamW step of a 40-layer pre-norm GPT-style decoder (causal mask, GELU,
tied embedding and output layer). In the first step AdamW creates its state (``exp_avg``,
``exp_avg_sq``, ``step``); in the steady step the state comes in as parameters. Both are taken
with ``_get_xla_tensors_hlo`` (the pending graph, as torch_xla prints it, no compile), with the
steady step's state transferred from the CPU, as the committed test pair was made.

    PJRT_DEVICE=CPU python benchmarks/hlo_pair.py [--layers 64] [--force]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "benchmarks", "data")
PAIR = (
    os.path.join(DATA, "encoder64_relu.before_optimizations.txt"),
    os.path.join(DATA, "encoder64_gelu_mid.before_optimizations.txt"),
)

PAIR_ADAMW = (
    os.path.join(DATA, "decoder40_adamw_step1.hlo.txt"),
    os.path.join(DATA, "decoder40_adamw_step2.hlo.txt"),
)

__all__ = ["DATA", "PAIR", "PAIR_ADAMW", "ensure_pair", "ensure_adamw_pair"]


def _child(layers: int, gelu_layer: int, reverse: int = 0) -> None:
    """Trace one training step and sync (the compile writes the dump)."""
    import torch
    import torch_xla

    torch.manual_seed(0)
    dev = torch_xla.device()
    stack = []
    for k in range(layers):
        act = "gelu" if k == gelu_layer else "relu"
        stack.append(
            torch.nn.TransformerEncoderLayer(
                d_model=32,
                nhead=4,
                dim_feedforward=64,
                dropout=0.0,
                batch_first=True,
                activation=act,
            )
        )
    model = torch.nn.Sequential(*stack).to(dev)
    params = list(model.parameters())
    if reverse:
        params.reverse()
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    for p in params:
        opt.state[p]["momentum_buffer"] = torch.zeros(p.shape).to(dev)
    x = torch.randn(2, 8, 32).to(dev)
    torch_xla.sync()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    torch_xla.sync()


def _decoder_child(layers: int, dest_a: str, dest_b: str) -> None:
    """First and steady AdamW step of a GPT-style decoder, as HLO text, without compiling."""
    import copy

    import torch
    import torch_xla

    torch.manual_seed(0)
    dev = torch_xla.device()
    vocab, width, seq = 64, 32, 8

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, width)
            self.pos = torch.nn.Parameter(torch.zeros(seq, width))
            self.blocks = torch.nn.ModuleList(
                torch.nn.TransformerEncoderLayer(
                    d_model=width,
                    nhead=4,
                    dim_feedforward=4 * width,
                    dropout=0.0,
                    batch_first=True,
                    activation="gelu",
                    norm_first=True,
                )
                for _ in range(layers)
            )
            self.norm = torch.nn.LayerNorm(width)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            h = self.embed(tokens) + self.pos
            mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=h.device)
            for block in self.blocks:
                h = block(h, src_mask=mask, is_causal=True)
            return self.norm(h) @ self.embed.weight.t()

    cpu_model = Decoder()
    tokens = torch.randint(0, vocab, (2, seq))
    texts = []
    for steady in (False, True):
        model = copy.deepcopy(cpu_model).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        if steady:
            for p in model.parameters():
                opt.state[p]["step"] = torch.tensor(1.0).to(dev)
                opt.state[p]["exp_avg"] = torch.zeros(p.shape).to(dev)
                opt.state[p]["exp_avg_sq"] = torch.zeros(p.shape).to(dev)
        logits = model(tokens.to(dev))
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, vocab), tokens.to(dev).roll(-1, 1).reshape(-1)
        )
        loss.backward()
        opt.step()
        live = [loss] + list(model.parameters())
        for p in model.parameters():
            live += [opt.state[p][k] for k in ("step", "exp_avg", "exp_avg_sq")]
        texts.append(torch_xla._XLAC._get_xla_tensors_hlo(live))
    for dest, text in zip((dest_a, dest_b), texts):
        with open(dest, "w") as fh:
            fh.write(text)


def ensure_adamw_pair(layers: int = 40, force: bool = False) -> tuple[str, str]:
    """The decoder's first and steady AdamW step, made with real torch_xla when missing."""
    if force or not all(os.path.exists(p) for p in PAIR_ADAMW):
        os.makedirs(DATA, exist_ok=True)
        env = dict(os.environ, PJRT_DEVICE="CPU")
        cmd = [sys.executable, os.path.abspath(__file__), "--decoder-child", str(layers)]
        subprocess.run(cmd + list(PAIR_ADAMW), env=env, check=True, timeout=900)
    return PAIR_ADAMW


def _largest_dump(folder: str) -> str | None:
    files = glob.glob(os.path.join(folder, "*SyncTensorsGraph*before_optimizations.txt"))
    return max(files, key=os.path.getsize) if files else None


def _complete(path: str) -> bool:
    """A dump is complete when its size stopped moving and it ends with the entry's ``}``."""
    size = os.path.getsize(path)
    time.sleep(0.5)
    if os.path.getsize(path) != size or size < 1_000_000:
        return False
    with open(path, "rb") as fh:
        fh.seek(max(0, size - 16))
        return fh.read().rstrip().endswith(b"}")


def make_one(
    dest: str, layers: int, gelu_layer: int, reverse: bool = False, timeout_s: float = 600
) -> None:
    """Run the child with ``--xla_dump_to`` and copy the step's dump to ``dest``."""
    tmp = tempfile.mkdtemp(prefix="hlo_pair_")
    env = dict(
        os.environ,
        PJRT_DEVICE="CPU",
        XLA_FLAGS=f"--xla_dump_to={tmp} --xla_dump_hlo_module_re=SyncTensorsGraph",
    )
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        str(layers),
        str(gelu_layer),
        str(int(reverse)),
    ]
    proc = subprocess.Popen(cmd, env=env)
    start = time.monotonic()
    try:
        while time.monotonic() - start < timeout_s:
            path = _largest_dump(tmp)
            if path and _complete(path):
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copy(path, dest)
                return
            if proc.poll() is not None and not (path and _complete(path)):
                raise SystemExit(f"the torch_xla child exited ({proc.returncode}) without a dump")
            time.sleep(0.5)
        raise SystemExit(f"no complete dump within {timeout_s:.0f} s")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def ensure_pair(layers: int = 64, force: bool = False) -> tuple[str, str]:
    """The two dump files, made with real torch_xla when missing (or ``force``)."""
    for dest, gelu in zip(PAIR, (-1, layers // 2)):
        if force or not os.path.exists(dest):
            make_one(dest, layers, gelu)
    return PAIR


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, type=int, metavar=("LAYERS", "GELU_LAYER", "REVERSE"))
    parser.add_argument("--decoder-child", nargs=3, metavar=("LAYERS", "DEST_A", "DEST_B"))
    parser.add_argument("--layers", type=int, default=64)
    parser.add_argument("--decoder-layers", type=int, default=40)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    if args.decoder_child:
        layers, dest_a, dest_b = args.decoder_child
        _decoder_child(int(layers), dest_a, dest_b)
        return
    for path in ensure_pair(args.layers, args.force) + ensure_adamw_pair(
        args.decoder_layers, args.force
    ):
        print(path, os.path.getsize(path))


if __name__ == "__main__":
    main()
