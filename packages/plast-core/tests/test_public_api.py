"""plast/__init__.py names every op family's public functions, and Tensor's op methods are those functions.

Both are written out (plast/__init__.py imports each op module's ``__all__`` by name; _tensor.py assigns the op
methods in the class body), so these tests keep the written lists and the op modules in agreement.
"""

import importlib
import inspect
import pkgutil

import plast
import plast.ops

# op-layer modules that are no op family: the table, the shared factories, the generator, fusion's rules,
# autocast's lists, how in-place writes reach a view's base
NOT_FAMILIES = {"registry", "factory", "creation", "random", "fusion_rules", "autocast", "view_writes"}


def _families():
    for info in sorted(pkgutil.iter_modules(plast.ops.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in NOT_FAMILIES:
            continue
        yield importlib.import_module(f"plast.ops.{info.name}")


def test_the_families_are_found():
    names = {m.__name__ for m in _families()}
    assert {"plast.ops.elementwise", "plast.ops.nn", "plast.ops.reduce", "plast.ops.attention"} <= names


def test_every_op_module_export_is_a_plast_name():
    missing, other = [], []
    for mod in _families():
        for name in getattr(mod, "__all__", ()):
            if not hasattr(plast, name):
                missing.append(f"{mod.__name__}.{name}")
            elif getattr(plast, name) is not getattr(mod, name):
                other.append(f"plast.{name} is not {mod.__name__}.{name}")
    assert not missing, f"add to plast/__init__.py's imports: {missing}"
    assert not other, other


def test_every_family_has_an_all_and_every_entry_exists():
    for mod in _families():
        if mod.__name__ in ("plast.ops.device", "plast.ops.inplace"):  # Tensor methods only (.to, .add_, ...)
            continue
        assert getattr(mod, "__all__", None), f"{mod.__name__} lists no public functions (__all__)"
        for name in mod.__all__:
            assert callable(getattr(mod, name)), (
                f"{mod.__name__}.__all__ names {name}, which is not a function"
            )


def test_op_methods_are_the_op_functions():
    # the same objects, not wrappers: t.sum(...) and plast.sum(t, ...) run one function
    from plast.ops import inplace

    T = plast.Tensor
    for name in (
        "sum",
        "mean",
        "reshape",
        "matmul",
        "exp",
        "relu",
        "gather",
        "squeeze",
        "clamp",
        "masked_fill",
    ):
        assert T.__dict__[name] is getattr(plast, name), name
    assert T.__dict__["__add__"] is plast.add and T.__dict__["__matmul__"] is plast.matmul
    assert T.__dict__["add_"] is inplace.add_ and T.__dict__["__iadd__"] is inplace.add_


def test_op_methods_are_written_in_the_class_body():
    # grep finds them: every op method of Tensor is assigned or defined in _tensor.py's source
    src = inspect.getsource(plast.Tensor)
    for name in ("softmax", "sum", "__getitem__", "__eq__", "masked_fill", "T", "is_cuda", "cuda"):
        assert f" {name} = " in src or f"def {name}(" in src, name
