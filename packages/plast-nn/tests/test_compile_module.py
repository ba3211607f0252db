"""plast.compile on a module: the module itself comes back (no ``_orig_mod.`` wrapper), results unchanged."""

import numpy as np

import plast


def test_compile_returns_the_module_itself():
    plast.manual_seed(0)
    model = plast.nn.Sequential(plast.nn.Linear(3, 4), plast.nn.ReLU(), plast.nn.Linear(4, 1))
    x = plast.randn(5, 3)
    before = model(x).detach().numpy()
    compiled = plast.compile(model, mode="reduce-overhead")
    assert compiled is model
    assert list(compiled.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    np.testing.assert_array_equal(compiled(x).detach().numpy(), before)
