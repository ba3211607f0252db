"""Run a PyTorch program on torch or on plast from the same initial weights.

    python bench/torch_programs/same_init.py torch W.npz [options] SCRIPT [args...]   # saves W.npz
    python bench/torch_programs/same_init.py plast W.npz [options] SCRIPT [args...]   # loads W.npz

SCRIPT runs as ``python SCRIPT args...`` would run it (``sys.argv``, ``sys.path[0]``, ``__main__``), on the real
torch or with ``import torch`` resolved to plast (``plast.torch.install()``). The first ``Module.to(...)`` call on
a module that has parameters (the programs here call ``model.to(device)`` right after building the model) is
hooked: on torch the module's state_dict is written to W.npz, on plast W.npz is loaded into the module (strict: the
keys must match). Options:

--zero-dropout   at that hook, set p = 0 on every Dropout module and ``dropout = 0.0`` on modules with a float
                 ``dropout`` attribute (nn.LSTM/GRU, nn.MultiheadAttention, nanoGPT's attention), for programs that
                 have no flag for it: dropout masks come from each library's own random stream
--load           load W.npz on torch too (instead of writing it): with --nudge, the control run
--nudge SEED     after the hook, move every floating-point tensor of the state by one float32 ulp (up or down at
                 random): how far torch drifts from itself under rounding-size changes, the yardstick for plast
--same-rng SEED  torch.randint, torch.randperm and torch.utils.data.RandomSampler draw from one numpy generator
                 seeded with SEED (on both libraries), so random batches and random splits are the same

``stubs/`` (a small ``torchvision`` stand-in, synthetic MNIST) goes on the end of ``sys.path``, and
``torch.utils.tensorboard`` becomes a no-op ``SummaryWriter`` where neither tensorboard (torch) nor tensorboardX
(plast) is installed.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _stub_tensorboard() -> None:
    try:
        import torch.utils.tensorboard  # noqa: F401
    except ImportError:
        mod = types.ModuleType("torch.utils.tensorboard")

        class SummaryWriter:
            def __init__(self, *args, **kwargs):
                pass

            def __getattr__(self, name):
                return lambda *args, **kwargs: None

        mod.SummaryWriter = SummaryWriter
        sys.modules["torch.utils.tensorboard"] = mod


def _zero_dropout(torch, model) -> int:
    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout) or type(m).__name__.endswith("Dropout"):
            m.p = 0.0
            n += 1
        if isinstance(getattr(m, "dropout", None), float):
            m.dropout = 0.0
            n += 1
    return n


def _nudge(torch, model, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for t in model.state_dict().values():
            if t.dtype == torch.float32:
                a = t.detach().cpu().numpy()
                step = rng.choice(np.array([-1, 1], np.float32), a.shape) * np.float32(2**-23)
                t.copy_(torch.from_numpy((a * (1 + step)).astype(np.float32)))


def _hook_first_to(torch, backend: str, weights: str, opts) -> None:
    original = torch.nn.Module.to
    done = []

    def to(self, *args, **kwargs):
        if not done and next(iter(self.parameters()), None) is not None:
            done.append(self)
            state = self.state_dict()
            if backend == "torch" and not opts.load:
                np.savez(weights, **{k: v.detach().cpu().numpy() for k, v in state.items()})
                print(
                    f"[same_init] saved {len(state)} tensors of {type(self).__name__} to {weights}",
                    file=sys.stderr,
                )
            else:
                w = np.load(weights)
                missing, extra = set(state) - set(w.files), set(w.files) - set(state)
                if missing or extra:
                    raise SystemExit(
                        f"[same_init] state_dict keys differ: plast only {missing}, torch only {extra}"
                    )
                self.load_state_dict({k: torch.from_numpy(w[k]) for k in w.files})
                print(
                    f"[same_init] loaded {len(w.files)} tensors of {type(self).__name__} from {weights}",
                    file=sys.stderr,
                )
            if opts.nudge is not None:
                _nudge(torch, self, opts.nudge)
                print("[same_init] every float32 tensor moved by one ulp", file=sys.stderr)
            if opts.zero_dropout:
                print(f"[same_init] dropout set to 0 in {_zero_dropout(torch, self)} places", file=sys.stderr)
        return original(self, *args, **kwargs)

    torch.nn.Module.to = to


def _same_rng(torch, seed: int) -> None:
    g = np.random.default_rng(seed)

    def randint(*args, size=None, dtype=None, generator=None, device=None, low=0, high=None, **kwargs):
        args = list(args)
        if size is None and args and isinstance(args[-1], (tuple, list, torch.Size)):
            size = args.pop()
        if len(args) == 2:
            low, high = args
        elif len(args) == 1:
            high = args[0]
        out = torch.from_numpy(g.integers(low, high, tuple(size)))
        return out.to(dtype) if dtype is not None else out

    def randperm(n, *, generator=None, dtype=None, device=None, **kwargs):
        out = torch.from_numpy(g.permutation(n))
        return out.to(dtype) if dtype is not None else out

    class RandomSampler(torch.utils.data.Sampler):
        def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
            self.data_source, self.replacement = data_source, replacement
            self._num_samples = num_samples

        @property
        def num_samples(self):
            return len(self.data_source) if self._num_samples is None else self._num_samples

        def __iter__(self):
            n = len(self.data_source)
            if self.replacement:
                for _ in range(self.num_samples // 32):
                    yield from g.integers(0, n, 32).tolist()
                yield from g.integers(0, n, self.num_samples % 32).tolist()
            else:
                for _ in range(self.num_samples // n):
                    yield from g.permutation(n).tolist()
                yield from g.permutation(n).tolist()[: self.num_samples % n]

        def __len__(self):
            return self.num_samples

    torch.randint, torch.randperm = randint, randperm
    torch.utils.data.RandomSampler = RandomSampler
    loader_module = sys.modules[torch.utils.data.DataLoader.__module__]
    if hasattr(loader_module, "RandomSampler"):  # DataLoader(shuffle=True) builds its sampler from here
        loader_module.RandomSampler = RandomSampler


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend", choices=["torch", "plast"])
    parser.add_argument("weights", help=".npz of the initial state_dict: written on torch, read on plast")
    parser.add_argument("--zero-dropout", action="store_true")
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--nudge", type=int, metavar="SEED")
    parser.add_argument("--same-rng", type=int, metavar="SEED")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    weights = os.path.abspath(opts.weights)

    if opts.backend == "plast":
        import plast.torch

        plast.torch.install()
    import torch
    import torch.utils.data

    _stub_tensorboard()
    _hook_first_to(torch, opts.backend, weights, opts)
    if opts.same_rng is not None:
        _same_rng(torch, opts.same_rng)

    sys.argv = [opts.script, *opts.args]
    sys.path[0] = os.path.dirname(os.path.abspath(opts.script))
    sys.path.append(os.path.join(HERE, "stubs"))
    runpy.run_path(opts.script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
