"""plast.save of whole objects (torch.save(model, f)) and plast.load's allow-list (torch.load with
weights_only and torch.serialization.safe_globals): round trips, sharing and cycles, and hostile files that
name callables loading must never call."""

import collections
import enum
import io
import json
import sys

import numpy as np
import pytest

import plast
from plast import serialization
from plast.errors import CheckpointError
from plast.serialization import UnpicklingError


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Box:
    """A user class as a model is one: tensors, containers, numbers, shared members, a reference to itself."""

    def __init__(self):
        self.w = plast.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).requires_grad_(True)
        self.b = plast.zeros(3)
        self.same_w = self.w  # one tensor, two names: stays one tensor
        self.ordered = collections.OrderedDict([("z", 1), ("a", (2.5, None))])
        self.tags = {"x", "y"}
        self.frozen = frozenset([1, 2])
        self.z = 1 + 2j
        self.color = Color.BLUE
        self.dtype = plast.float64
        self.device = plast.device("cpu")
        self.fn = plast.relu
        self.cls = Color
        self.me = self
        self.child = Leaf(7)
        self.children = [self.child, Leaf(8)]


class Leaf:
    def __init__(self, n):
        self.n = n
        self.t = plast.full((n,), float(n))


class WithState:
    """A class with __getstate__/__setstate__: both are used, as pickle does."""

    def __init__(self):
        self.keep, self.cache = plast.ones(2), "dropped"

    def __getstate__(self):
        return {"keep": self.keep}

    def __setstate__(self, state):
        self.keep = state["keep"]
        self.cache = "rebuilt"


def _saved(obj):
    buf = io.BytesIO()
    plast.save(obj, buf)
    buf.seek(0)
    return buf


def _header(buf):
    data = buf.getvalue()
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])["__metadata__"]


def test_whole_object_round_trip_keeps_values_sharing_and_types():
    box = Box()
    with serialization.safe_globals([Box, Leaf, Color]):
        back = plast.load(_saved(box))
    assert type(back) is Box and back.me is back
    assert back.same_w is back.w and back.children[0] is back.child
    np.testing.assert_array_equal(back.w.detach().numpy(), box.w.detach().numpy())
    assert back.w.requires_grad and not back.b.requires_grad and back.w.is_leaf
    assert back.ordered == box.ordered and type(back.ordered) is collections.OrderedDict
    assert list(back.ordered) == ["z", "a"] and back.ordered["a"] == (2.5, None)
    assert back.tags == {"x", "y"} and back.frozen == frozenset([1, 2]) and back.z == 1 + 2j
    assert back.color is Color.BLUE and back.cls is Color
    assert back.dtype == plast.float64 and back.device == plast.device("cpu") and back.fn is plast.relu
    assert [c.n for c in back.children] == [7, 8]
    assert back.children[1].t.tolist() == [8.0] * 8
    # the loaded tensors are ordinary leaves: gradients flow
    (back.w * 2).sum().backward()
    assert back.w.grad.tolist() == [[2.0] * 3] * 2


def test_object_files_are_format_3_and_state_dicts_stay_format_2():
    assert _header(_saved({"w": plast.ones(2)}))["format"] == "plast.save/2"
    assert _header(_saved(Leaf(2)))["format"] == "plast.save/3"
    # a tensor under two names of a plain dict stays two entries (other safetensors readers see both names)
    t = plast.ones(2)
    assert len(plast.load(_saved({"a": t, "b": t}))) == 2


def test_get_and_set_state_are_used():
    with serialization.safe_globals([WithState]):
        back = plast.load(_saved(WithState()))
    assert back.keep.tolist() == [1.0, 1.0] and back.cache == "rebuilt"


def test_loading_needs_the_classes_allowed():
    buf = _saved(Leaf(3))
    with pytest.raises(UnpicklingError, match=r"Leaf.*safe_globals\(\[Leaf\]\)"):
        plast.load(buf)
    buf.seek(0)
    with pytest.raises(UnpicklingError, match="weights_only=False does not lift this"):
        plast.load(buf, weights_only=False)  # no unsafe mode: weights_only is accepted, lifts nothing
    buf.seek(0)
    with serialization.safe_globals([Leaf]):
        assert plast.load(buf).n == 3
    buf.seek(0)
    with pytest.raises(UnpicklingError):  # the block is over
        plast.load(buf)
    # torch's (object, "module.name") form, and add_safe_globals / get / clear
    buf.seek(0)
    with serialization.safe_globals([(Leaf, f"{__name__}.Leaf")]):
        assert plast.load(buf).n == 3
    try:
        serialization.add_safe_globals([Leaf])
        assert Leaf in serialization.get_safe_globals()
        buf.seek(0)
        assert plast.load(buf).n == 3
    finally:
        serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []
    buf.seek(0)
    with pytest.raises(UnpicklingError):
        plast.load(buf)


def test_unstorable_things_name_the_problem():
    class Local:  # defined in a function: no name to find it by
        pass

    with pytest.raises(TypeError, match="inside another function"):
        plast.save(Local(), io.BytesIO())
    with pytest.raises(TypeError, match="lambda"):
        plast.save({"f": lambda x: x}, io.BytesIO())
    with pytest.raises(TypeError, match="pickle is never used"):
        plast.save([b"raw"], io.BytesIO())


# ---- hostile files: a tree written by hand names what loading must never call -------------------------------


def _file(tree, tensors=None):
    meta = {"format": "plast.save/3", "plast": json.dumps(tree)}
    header, chunks = serialization._serialize(tensors or {}, meta)
    return io.BytesIO(header + b"".join(bytes(c) for c in chunks))


def _reduce(fn, args, **rest):
    return {"__reduce__": {"__global__": fn}, "args": args, "id": 0, **rest}


def test_a_file_cannot_call_os_system_or_plast_functions(tmp_path):
    victim = tmp_path / "victim"
    with pytest.raises(UnpicklingError, match="os.system"):
        plast.load(_file(_reduce("os:system", [f"touch {victim}"])))
    with pytest.raises(UnpicklingError, match="builtins.eval"):
        plast.load(_file(_reduce("builtins:eval", ["1"])))
    # plast's own functions may be named as values, but never called to build an object (plast.save would write
    # a file of the attacker's choosing)
    target = tmp_path / "written.safetensors"
    with pytest.raises(UnpicklingError, match="would call plast.serialization.save"):
        plast.load(_file(_reduce("plast.serialization:save", [{}, str(target)])))
    assert not victim.exists() and not target.exists()
    # nor can an allowed user class be created through a plast function other than plast's reconstructors
    with pytest.raises(UnpicklingError, match="would call"):
        plast.load(_file(_reduce("plast.ops.creation:tensor", [[1.0]])))


def test_plast_classes_with_their_own_new_are_not_created():
    # an extension type's __new__ runs its __cinit__ (an arena allocates): never for a file, unless allowed
    with pytest.raises(UnpicklingError, match="through its own __new__"):
        plast.load(
            _file(_reduce("copyreg:__newobj__", [{"__global__": "plast.memory.arena:Arena"}, 1 << 40]))
        )


def test_a_file_never_imports_a_plast_module_by_name():
    # plast's distributions are imported as `import plast.nn` would; a module they do not load is never run
    sys.modules.pop("plast.torch.__main__", None)
    with pytest.raises(UnpicklingError, match="not a module"):
        plast.load(_file({"__global__": "plast.torch.__main__:main"}))
    assert "plast.torch.__main__" not in sys.modules


def test_a_file_never_imports_a_module():
    assert "antigravity" not in sys.modules
    with pytest.raises(UnpicklingError, match="antigravity.fly"):
        plast.load(_file({"__global__": "antigravity:fly"}))
    with pytest.raises(UnpicklingError):
        plast.load(_file(_reduce("copyreg:__newobj__", [{"__global__": "antigravity:Thing"}])))
    assert "antigravity" not in sys.modules


@pytest.mark.parametrize(
    "tree,match",
    [
        ({"__again__": 0}, "shared-object reference"),
        (_reduce("collections:OrderedDict", [], id=3), "out of sequence"),
        ({"__reduce__": "collections:OrderedDict", "args": [], "id": 0}, "constructor is not a global"),
        (_reduce("collections:OrderedDict", [], extra=1), "object node is malformed"),
        (_reduce("copyreg:__newobj__", [1]), "not a class"),
        (_reduce("collections:OrderedDict", [], dictitems=[[1]]), "dict items are malformed"),
        ({"__global__": "no-colon"}, "not 'module:qualname'"),
        ({"__tensor__": "w", "again": True}, "before it is loaded"),
        ({"__tensor__": "w", "cls": "collections:OrderedDict"}, "not a tensor class"),
    ],
)
def test_malformed_object_trees_are_checkpoint_errors(tree, match):
    with pytest.raises(CheckpointError, match=match):
        plast.load(_file(tree, {"w": np.ones(2, np.float32)} if "__tensor__" in tree else None))


def test_object_markers_are_refused_in_format_2_files():
    meta = {"format": "plast.save/1", "plast": json.dumps({"__global__": "collections:OrderedDict"})}
    header, chunks = serialization._serialize({}, meta)
    with pytest.raises(CheckpointError, match="unknown marker"):
        plast.load(io.BytesIO(header))


def test_plast_containers_and_enums_are_rebuilt_without_an_allow_list():
    # plast's own enum (Device) and dtype objects come back through their reconstructors, allowed by name
    back = plast.load(
        _saved({"dev": plast.Device.CPU, "dt": plast.int64, "odict": collections.OrderedDict(a=1)})
    )
    assert back["dev"] is plast.Device.CPU and back["dt"] == plast.int64 and back["odict"] == {"a": 1}
