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


# pytorch/examples' word_language_model, shrunk (its model, repackage_hidden, clipping and the p.data update), with
# makemore's import path for the DataLoader module
LSTM_LM = """
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data.dataloader import DataLoader  # noqa: F401 (makemore imports it from here)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.drop = nn.Dropout(0.0)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, sys.argv[2])(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if isinstance(self.rnn, nn.LSTM):
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


w = np.load(sys.argv[1])
model = RNNModel(50, 12, 16, 2)
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.from_numpy(w[sys.argv[2] + "." + name]))
criterion = nn.NLLLoss()
data = torch.from_numpy(w["tokens"]).long()
hidden = model.init_hidden(4)
for i in range(0, 20):
    x, y = data[i : i + 5], data[i + 1 : i + 6].reshape(-1)
    hidden = repackage_hidden(hidden)
    model.zero_grad()
    output, hidden = model(x, hidden)
    loss = criterion(output, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-5.0)
    print(loss.item())

# the program's checkpoint: the whole model, reloaded with the classes it holds allowed (as main.py does)
with open("model.pt", "wb") as f:
    torch.save(model, f)
with open("model.pt", "rb") as f:
    allowed = [RNNModel, nn.Dropout, nn.Embedding, torch.nn.modules.linear.Linear, torch.nn.modules.rnn.LSTM,
               torch.nn.modules.rnn.GRU]
    with torch.serialization.safe_globals(allowed):
        loaded = torch.load(f)
assert type(loaded) is RNNModel and type(loaded.rnn) is type(model.rnn)
assert [n for n, _ in loaded.named_parameters()] == [n for n, _ in model.named_parameters()]
assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in loaded.parameters())
model.eval()
loaded.eval()
with torch.no_grad():
    out, _ = loaded(data[:5], loaded.init_hidden(4))
    ref, _ = model(data[:5], model.init_hidden(4))
assert torch.equal(out, ref)
print(criterion(out, data[1:6].reshape(-1)).item())
"""


def _rnn_weights(rng):
    w = {"tokens": rng.integers(0, 50, (26, 4))}
    for kind, gates in (("LSTM", 4), ("GRU", 3)):
        w[f"{kind}.encoder.weight"] = rng.standard_normal((50, 12)).astype(np.float32)
        for layer, n_in in ((0, 12), (1, 16)):
            for name, shape in (
                (f"weight_ih_l{layer}", (gates * 16, n_in)),
                (f"weight_hh_l{layer}", (gates * 16, 16)),
                (f"bias_ih_l{layer}", (gates * 16,)),
                (f"bias_hh_l{layer}", (gates * 16,)),
            ):
                w[f"{kind}.rnn.{name}"] = rng.uniform(-0.25, 0.25, shape).astype(np.float32)
        w[f"{kind}.decoder.weight"] = rng.uniform(-0.1, 0.1, (50, 16)).astype(np.float32)
        w[f"{kind}.decoder.bias"] = np.zeros(50, np.float32)
    return w


# pytorch/examples' mnist classifier, shrunk (fewer channels, no dropout so the losses are deterministic): Conv2d,
# relu, max_pool2d, flatten, log_softmax, nll_loss, Adadelta stepped down by StepLR each epoch, an eval pass
CNN = """
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.0)
        self.fc1 = nn.Linear(8 * 12 * 12, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


w = np.load(sys.argv[1])
torch.manual_seed(1)
device = torch.device("cpu")
model = Net().to(device)
model.load_state_dict({k: torch.from_numpy(w[k]) for k in model.state_dict()})
images = (torch.from_numpy(w["images"]) - 0.1307) / 0.3081
loader = DataLoader(TensorDataset(images, torch.from_numpy(w["labels"])), batch_size=8)
optimizer = optim.Adadelta(model.parameters(), lr=1.0)
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
losses = []
for epoch in range(1, 6):
    model.train()
    for data, target in loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        out = model(images)
        pred = out.argmax(dim=1, keepdim=True)
        correct = pred.eq(torch.from_numpy(w["labels"]).view_as(pred)).sum().item()
    scheduler.step()
print(" ".join(repr(v) for v in losses))
"""


def _cnn_weights(rng):
    def uniform(shape, fan_in):
        return rng.uniform(-(fan_in**-0.5), fan_in**-0.5, shape).astype(np.float32)

    return {
        "conv1.weight": uniform((4, 1, 3, 3), 9),
        "conv1.bias": uniform(4, 9),
        "conv2.weight": uniform((8, 4, 3, 3), 36),
        "conv2.bias": uniform(8, 36),
        "fc1.weight": uniform((16, 8 * 12 * 12), 8 * 12 * 12),
        "fc1.bias": uniform(16, 8 * 12 * 12),
        "fc2.weight": uniform((10, 16), 16),
        "fc2.bias": uniform(10, 16),
        "images": rng.random((32, 1, 28, 28)).astype(np.float32),
        "labels": rng.integers(0, 10, 32),
    }


# custom torch.autograd.Functions in a small model: a Linear with needs_input_grad (its input needs none), a maxout
# whose argmax output is marked non-differentiable and whose backward is once_differentiable, and a swish written
# with setup_context
FUNCTION = """
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class Maxout(Function):  # max over the last dimension; the argmax comes back too, marked non-differentiable

    @staticmethod
    def forward(ctx, x):
        values, indices = x.max(dim=-1)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.input_shape = x.shape
        return values, indices

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_values, grad_indices):
        (indices,) = ctx.saved_tensors
        grad = torch.zeros(ctx.input_shape, dtype=grad_values.dtype)
        grad.scatter_(-1, indices.unsqueeze(-1), grad_values.unsqueeze(-1))
        return grad


class Swish(Function):
    @staticmethod
    def forward(x):
        return x * torch.sigmoid(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s * (1 + x * (1 - s)))


class Linear(nn.Module):
    def __init__(self, input_features, output_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(output_features, input_features))
        self.bias = nn.Parameter(torch.empty(output_features))

    def forward(self, input):
        return LinearFunction.apply(input, self.weight, self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Linear(6, 32)
        self.fc2 = Linear(16, 3)

    def forward(self, x):
        h, winner = Maxout.apply(self.fc1(x).view(x.shape[0], 16, 2))
        assert not winner.requires_grad
        return self.fc2(Swish.apply(h))


w = np.load(sys.argv[1])
model = Net()
model.load_state_dict({k: torch.from_numpy(w[k]) for k in model.state_dict()})
x, y = torch.from_numpy(w["x"]), torch.from_numpy(w["y"])
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
losses = []
for step in range(20):
    xb, yb = x[step % 4 * 8 : step % 4 * 8 + 8], y[step % 4 * 8 : step % 4 * 8 + 8]
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(" ".join(repr(v) for v in losses))
"""


def _function_weights(rng):
    return {
        "fc1.weight": (rng.standard_normal((32, 6)) * 0.4).astype(np.float32),
        "fc1.bias": (rng.standard_normal(32) * 0.1).astype(np.float32),
        "fc2.weight": (rng.standard_normal((3, 16)) * 0.3).astype(np.float32),
        "fc2.bias": np.zeros(3, np.float32),
        "x": rng.standard_normal((32, 6)).astype(np.float32),
        "y": rng.integers(0, 3, 32),
    }


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_word_language_model_style_rnn_runs_unchanged(tmp_path, kind):
    (tmp_path / "lm.py").write_text(LSTM_LM)
    np.savez(tmp_path / "w.npz", **_rnn_weights(np.random.default_rng(1)))
    ref = _losses(["lm.py", "w.npz", kind], tmp_path)
    got = _losses(["-m", "plast.torch", "lm.py", "w.npz", kind], tmp_path)
    assert len(ref) == len(got) == 21  # 20 steps, then the reloaded whole-model checkpoint's loss
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=0)


def test_torch_utils_data_submodules_are_plast_data():
    out = subprocess.run(
        [sys.executable, "-c", (
            "import plast.torch; plast.torch.install(); import plast.data as pd\n"
            "from torch.utils.data.dataloader import DataLoader\n"
            "from torch.utils.data.dataset import Dataset\n"
            "from torch.utils.data.sampler import RandomSampler\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "assert (DataLoader, Dataset, RandomSampler, DistributedSampler) == "
            "(pd.DataLoader, pd.Dataset, pd.RandomSampler, pd.DistributedSampler)\n"
        )],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def _losses(args, cwd):
    out = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return np.array([float(v) for v in out.stdout.split()])


@pytest.mark.parametrize(
    "script,weights",
    [(MLP, _mlp_weights), (GPT, _gpt_weights), (CNN, _cnn_weights), (FUNCTION, _function_weights)],
    ids=["mlp", "gpt", "cnn", "autograd_function"],
)
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


SPAWN_WORKERS = """
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):  # defined in __main__: a spawned worker imports this script again to unpickle it
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([float(i * i)]), type(torch.ones(1)).__module__


if __name__ == "__main__":
    for ctx in sys.argv[1:]:
        loader = DataLoader(Squares(), batch_size=4, num_workers=2, multiprocessing_context=ctx)
        for x, where in loader:
            print(ctx, x.flatten().tolist(), sorted(set(where)))
"""


def test_spawn_and_forkserver_workers_run_the_script_on_plast_too(tmp_path):
    # the workers' `import torch` (re-importing __main__) resolves to plast as in the parent: before, it imported
    # the real torch where one is installed (as here), and collation failed on its tensors
    (tmp_path / "train.py").write_text(textwrap.dedent(SPAWN_WORKERS))
    out = subprocess.run(
        [sys.executable, "-m", "plast.torch", "train.py", "spawn", "forkserver"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    for ctx in ("spawn", "forkserver"):
        assert f"{ctx} [0.0, 1.0, 4.0, 9.0] ['plast._tensor']" in lines, out.stdout
        assert f"{ctx} [16.0, 25.0, 36.0, 49.0] ['plast._tensor']" in lines, out.stdout
