"""``python -m plast.torch SCRIPT``: PyTorch-style training scripts (torch.nn, torch.optim, torch.utils.data) run
unchanged on plast and give torch's losses, from the same initial weights (saved with numpy), over 20 steps."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("torch")

MLP = """
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

w = np.load(sys.argv[1])
torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


model = MLP()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(w[name]))
loader = DataLoader(TensorDataset(torch.from_numpy(w["x"]), torch.from_numpy(w["y"])), batch_size=16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
sched = StepLR(opt, step_size=5, gamma=0.5)
losses = []
for epoch in range(5):
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
print(" ".join(repr(v) for v in losses))
"""

GPT = """
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

w = np.load(sys.argv[1])
V, C, T = 11, 16, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

    def forward(self, x):
        B, T_, _ = x.shape
        q, k, v = self.qkv(self.ln(x)).split(C, dim=2)
        q, k, v = (t.view(B, T_, 2, C // 2).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T_, C))
        return x + self.mlp(x)


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.block = Block()
        self.head = nn.Linear(C, V, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], dtype=torch.long)
        logits = self.head(self.block(self.wte(idx) + self.wpe(pos)))
        return F.cross_entropy(logits.view(-1, V), targets.reshape(-1))


model = GPT()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(w[name]))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
data = torch.from_numpy(w["tokens"])
losses = []
for step in range(20):
    x = data[step % 4 : step % 4 + 4, :T]
    y = data[step % 4 : step % 4 + 4, 1 : T + 1]
    loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(" ".join(repr(v) for v in losses))
"""


def _mlp_weights(rng):
    f = np.float32
    return {
        "fc1.weight": (rng.standard_normal((16, 8)) * 0.3).astype(f),
        "fc1.bias": (rng.standard_normal(16) * 0.1).astype(f),
        "fc2.weight": (rng.standard_normal((3, 16)) * 0.3).astype(f),
        "fc2.bias": np.zeros(3, f),
        "x": rng.standard_normal((64, 8)).astype(f),
        "y": rng.integers(0, 3, 64),
    }


def _gpt_weights(rng):
    V, C, T = 11, 16, 8
    shapes = {
        "wte.weight": (V, C),
        "wpe.weight": (T, C),
        "block.ln.weight": (C,),
        "block.ln.bias": (C,),
        "block.qkv.weight": (3 * C, C),
        "block.qkv.bias": (3 * C,),
        "block.proj.weight": (C, C),
        "block.proj.bias": (C,),
        "block.mlp.0.weight": (4 * C, C),
        "block.mlp.0.bias": (4 * C,),
        "block.mlp.2.weight": (C, 4 * C),
        "block.mlp.2.bias": (C,),
        "head.weight": (V, C),
    }
    w = {k: (rng.standard_normal(s) * 0.2).astype(np.float32) for k, s in shapes.items()}
    w["block.ln.weight"] += 1
    w["tokens"] = rng.integers(0, V, (8, T + 1))
    return w


def _losses(args, cwd):
    out = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return np.array([float(v) for v in out.stdout.split()])


@pytest.mark.parametrize("script,weights", [(MLP, _mlp_weights), (GPT, _gpt_weights)], ids=["mlp", "gpt"])
def test_torch_script_runs_unchanged(tmp_path, script, weights):
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    np.savez(tmp_path / "w.npz", **weights(np.random.default_rng(0)))
    ref = _losses(["train.py", "w.npz"], tmp_path)
    got = _losses(["-m", "plast.torch", "train.py", "w.npz"], tmp_path)
    assert len(ref) == len(got) == 20
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=0)


def test_readme_example(tmp_path):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme[readme.index("## Running PyTorch scripts unchanged") :]
    (tmp_path / "train.py").write_text(section.split("```python\n")[1].split("```")[0])
    out = subprocess.run(
        [sys.executable, "-m", "plast.torch", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("accuracy 0.9") or out.stdout.startswith("accuracy 1.00"), out.stdout
