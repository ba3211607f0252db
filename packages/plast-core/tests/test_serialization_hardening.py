"""plast.save / plast.load hardening: injective structure, checksums, hostile files, file objects, interop."""

import io
import json
import math
import os
import pathlib
import random
import stat
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plast
from plast import serialization

FIXTURE = pathlib.Path(__file__).parent / "data" / "plast_save_v1.safetensors"


def _same(a, b):
    """Exact equality, container types and float signs included; tensors by dtype, shape and bits."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, plast.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.numpy().tobytes() == b.numpy().tobytes()
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert type(k) is type([k2 for k2 in b if k2 == k][0])
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    else:
        assert a == b


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    plast.save(obj, buf)
    buf.seek(0)
    return plast.load(buf, **kw), buf.getvalue()


# ---- 1. every tree round-trips, whatever its keys ------------------------------------------------------------

NASTY = [
    "",
    ".",
    "#",
    "#1",
    "a",
    "b",
    "a.b",
    "a.b#1",
    "a.b#2",
    "tensor",
    "tensor#1",
    "0",
    "__metadata__",
    "__tensor__",
    "__dict__",
    "__tuple__",
    "__float__",
    "device",
    "\ud800",
    "é",
    "😀",
    "\x00",
    '"',
    "\\",
    " ",
]
DTYPES = [plast.float32, plast.float64, plast.int64, plast.int32, plast.bool, plast.float16, plast.bfloat16]


def _make_tensor(args):
    dt, shape, seed = args
    vals = np.random.default_rng(seed).standard_normal(shape) * 10
    return plast.tensor(vals.astype(np.float64)).to(dt)


tensors = st.tuples(
    st.sampled_from(DTYPES), st.lists(st.integers(0, 3), max_size=3).map(tuple), st.integers(0, 99)
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=4)
    | tensors.map(_make_tensor)
)
str_keys = st.sampled_from(NASTY) | st.text(max_size=4)
any_keys = (
    str_keys
    | st.integers(-5, 5)
    | st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
)
trees = st.recursive(
    leaves,
    lambda c: (
        st.lists(c, max_size=3)
        | st.lists(c, max_size=3).map(tuple)
        | st.dictionaries(str_keys, c, max_size=4)
        | st.dictionaries(any_keys, c, max_size=3)
    ),
    max_leaves=14,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees)
def test_any_tree_round_trips_exactly(obj):
    from safetensors.torch import load as torch_load_bytes

    back, raw = _roundtrip(obj)
    _same(obj, back)
    torch_load_bytes(raw)  # and the file stays a safetensors file other tools read


def test_colliding_paths_keep_every_tensor():
    x, y, z = plast.ones(1), plast.zeros(1), plast.full((1,), 2.0)
    obj = {"a.b#2": x, "a.b": y, "a": {"b": z}, "a.b#1": [z * 3]}
    back, _ = _roundtrip(obj)
    _same(obj, back)


def test_a_key_named_metadata_saves_and_loads(tmp_path):
    from safetensors.torch import load_file

    obj = {"__metadata__": plast.ones(2), "w": plast.zeros(1)}
    plast.save(obj, tmp_path / "m.safetensors")
    _same(plast.load(tmp_path / "m.safetensors"), obj)
    assert set(load_file(str(tmp_path / "m.safetensors"))) == {"__metadata__#1", "w"}


def test_flat_state_dicts_keep_their_names_for_torch(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    sd = {
        "layer.0.weight": plast.ones(2, 2),
        "layer.0.bias": plast.zeros(2),
        "h": plast.ones(3, dtype=plast.bfloat16),
    }
    plast.save({"model": sd, "step": 3}, tmp_path / "n.safetensors")
    got = load_file(str(tmp_path / "n.safetensors"))
    assert set(got) == {"model.layer.0.weight", "model.layer.0.bias", "model.h"}
    assert got["model.h"].dtype == torch.bfloat16 and torch.equal(
        got["model.layer.0.weight"], torch.ones(2, 2)
    )


# ---- 2. corruption is detected -------------------------------------------------------------------------------


def _small_file():
    obj = {
        "w": plast.arange(6).float().reshape(2, 3),
        "n": {"i": plast.tensor([1, 2]), "t": (1.5, "é", None)},
    }
    buf = io.BytesIO()
    plast.save(obj, buf, metadata={"epoch": 2})
    return obj, buf.getvalue()


def _load_flipped(data, pos, bit):
    bad = bytearray(data)
    bad[pos] ^= 1 << bit
    return plast.load(io.BytesIO(bytes(bad)))


def test_every_header_bit_flip_is_caught_or_harmless():
    obj, data = _small_file()
    hlen = 8 + int.from_bytes(data[:8], "little")
    harmless = 0
    for pos in range(hlen):
        for bit in range(8):
            try:
                back = _load_flipped(data, pos, bit)
            except plast.CheckpointError:
                continue
            _same(back, obj)  # only a flip that changes nothing may load
            harmless += 1
    assert harmless < 16  # (a hex digit's case in a \u escape, say) — never a silent change


def test_payload_bit_flips_are_caught():
    obj, data = _small_file()
    hlen = 8 + int.from_bytes(data[:8], "little")
    rng = random.Random(0)
    for _ in range(200):
        pos = rng.randrange(hlen, len(data))
        with pytest.raises(plast.CheckpointError, match="sha256"):
            _load_flipped(data, pos, rng.randrange(8))


def test_error_names_the_file(tmp_path):
    _, data = _small_file()
    p = tmp_path / "ckpt.safetensors"
    bad = bytearray(data)
    bad[-1] ^= 1
    p.write_bytes(bytes(bad))
    with pytest.raises(plast.CheckpointError, match=r"ckpt\.safetensors.*data does not match its sha256"):
        plast.load(p)


def test_files_without_checksums_still_load(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    sd = {"weight": torch.randn(2, 3), "bias": torch.randn(2).to(torch.bfloat16), "n": torch.tensor(3)}
    save_file(sd, str(tmp_path / "t.safetensors"), metadata={"format": "pt"})
    back, meta = plast.load(tmp_path / "t.safetensors", with_metadata=True)
    assert meta == {"format": "pt"}
    assert back["bias"].dtype == plast.bfloat16 and back["n"].item() == 3
    np.testing.assert_array_equal(back["weight"].numpy(), sd["weight"].numpy())


def test_format_1_files_still_load():
    back, meta = plast.load(FIXTURE, with_metadata=True)
    assert meta == {"epoch": "3"}
    assert back["model"]["w"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert back["model"]["b"].dtype == plast.float64 and back["model"]["b"].tolist() == [1.5, -2.0]
    assert back["optim"]["state"][0]["step"].item() == 5.0 and back["optim"]["state"][0]["buf"].tolist() == [
        1,
        2,
        3,
    ]
    assert back["optim"]["param_groups"] == [
        {"lr": 0.001, "betas": (0.9, 0.999), "params": [0], "name": None}
    ]
    assert back["h"].dtype == plast.bfloat16 and back["h"].tolist() == [0.5, 2.0]
    assert back["mask"].tolist() == [True, False]
    assert (
        back["step"] == 7 and back["inf"] == -math.inf and back["tag"] == "v1" and back["__x"] == [1, "two"]
    )


def test_a_newer_format_is_refused():
    meta = {"format": "plast.save/9", "plast": "{}"}
    header, chunks = serialization._serialize({}, meta)
    with pytest.raises(plast.CheckpointError, match="plast.save/9"):
        plast.load(io.BytesIO(header))


# ---- 3. only regular files; hostile headers ------------------------------------------------------------------


def _load_soon(path):
    """plast.load(path) in a thread that must finish at once (a blocking open would hang it)."""
    out = {}

    def run():
        try:
            plast.load(path)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["e"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(10)
    assert not th.is_alive(), "plast.load blocked"
    return out.get("e")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_directory_and_device_are_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    for path, kind in [(fifo, "a FIFO"), (tmp_path, "a directory"), ("/dev/null", "a character device")]:
        if not os.path.exists(path):
            continue
        e = _load_soon(path)
        assert isinstance(e, plast.CheckpointError), e
        assert str(path) in str(e) and kind in str(e)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def _raw(header, payload=b""):
    text = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return len(text).to_bytes(8, "little") + text + payload


def _v2(tree, tensors=None):
    """A well-checksummed format-2 file whose structure entry is `tree` (a JSON string or object)."""
    text = tree if isinstance(tree, str) else json.dumps(tree)
    header, chunks = serialization._serialize(tensors or {}, {"format": serialization.FORMAT, "plast": text})
    return header + b"".join(bytes(c) for c in chunks)


W = {"w": np.ones(2, np.float32)}
T8 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
HOSTILE = {
    "header-is-a-list": _raw([1, 2]),
    "metadata-not-a-dict": _raw({"__metadata__": [1]}),
    "metadata-value-int": _raw({"__metadata__": {"a": 1}}),
    "info-is-a-string": _raw({"w": "x"}),
    "dtype-int": _raw({"w": {**T8, "dtype": 5}}, b"\0" * 8),
    "dtype-unknown": _raw({"w": {**T8, "dtype": "F128"}}, b"\0" * 8),
    "dtype-plast-lacks": _raw({"w": {**T8, "dtype": "U16", "shape": [4]}}, b"\0" * 8),
    "shape-negative": _raw({"w": {**T8, "shape": [-2]}}, b"\0" * 8),
    "shape-float": _raw({"w": {**T8, "shape": [2.0]}}, b"\0" * 8),
    "shape-bool": _raw({"w": {**T8, "shape": [True, True]}}, b"\0" * 8),
    "shape-string": _raw({"w": {**T8, "shape": "2"}}, b"\0" * 8),
    "shape-huge": _raw({"w": {**T8, "shape": [10**30, 10**30]}}, b"\0" * 8),
    "offsets-negative": _raw({"w": {**T8, "data_offsets": [-8, 0]}}, b"\0" * 8),
    "offsets-one": _raw({"w": {**T8, "data_offsets": [8]}}, b"\0" * 8),
    "offsets-reversed": _raw({"w": {**T8, "data_offsets": [8, 0]}}, b"\0" * 8),
    "offsets-beyond": _raw({"w": {**T8, "data_offsets": [10**15, 10**15 + 8]}}, b"\0" * 8),
    "offsets-overlap": _raw({"w": T8, "v": T8}, b"\0" * 16),
    "offsets-gap": _raw({"w": {**T8, "data_offsets": [8, 16]}}, b"\0" * 16),
    "trailing-data": _raw({"w": T8}, b"\0" * 12),
    "duplicate-names": _raw(
        b'{"w":' + json.dumps(T8).encode() + b',"w":' + json.dumps(T8).encode() + b"}", b"\0" * 8
    ),
    "header-longer-than-file": (10**6).to_bytes(8, "little") + b"{}",
    "header-length-huge": (2**64 - 1).to_bytes(8, "little") + b"{}",
    "header-not-utf8": _raw(b'{"\xff":1}'),
    "header-deep": _raw(b"[" * 100_000 + b"]" * 100_000),
    "tree-deep-json": _v2("[" * 100_000 + "]" * 100_000),
    "tree-deep-valid": _v2("[" * 900 + "]" * 900),
    "tree-not-json": _v2("{nope"),
    "tree-tensor-int": _v2({"__tensor__": 5}),
    "tree-tensor-missing": _v2({"__tensor__": "w"}),
    "tree-tensor-twice": _v2([{"__tensor__": "w"}, {"__tensor__": "w"}], W),
    "tree-tensor-unused": _v2([], W),
    "tree-tensor-extra-field": _v2({"__tensor__": "w", "x": 1}, W),
    "tree-device-int": _v2({"__tensor__": "w", "device": 0}, W),
    "tree-device-unknown": _v2({"__tensor__": "w", "device": "tpu"}, W),
    "tree-tuple-int": _v2({"__tuple__": 3}),
    "tree-dict-not-pairs": _v2({"__dict__": [[1]]}),
    "tree-dict-list-key": _v2({"__dict__": [[[1], 2]]}),
    "tree-dict-int": _v2({"__dict__": 4}),
    "tree-float-junk": _v2({"__float__": "abc"}),
    "tree-float-int": _v2({"__float__": 1}),
    "tree-unknown-marker": _v2({"__pickle__": "os.system"}),
    "format-2-without-checksums": _raw({"__metadata__": {"format": serialization.FORMAT, "plast": "1"}}),
    "plast-tree-without-format": _raw({"__metadata__": {"plast": "1"}}),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_files_raise_checkpoint_error_naming_the_file(tmp_path, name):
    p = tmp_path / f"{name}.safetensors"
    p.write_bytes(HOSTILE[name])
    with pytest.raises(plast.CheckpointError) as e:
        plast.load(p)
    assert p.name in str(e.value) and len(str(e.value)) < 600
    with pytest.raises(plast.CheckpointError):
        plast.load(io.BytesIO(HOSTILE[name]))


def test_deep_or_cyclic_objects_are_refused_at_save():
    deep = []
    for _ in range(serialization.MAX_DEPTH + 5):
        deep = [deep]
    cyclic = []
    cyclic.append(cyclic)
    for obj in (deep, cyclic):
        with pytest.raises(ValueError, match="nested deeper"):
            plast.save(obj, io.BytesIO())


# ---- 4. file objects, map_location, weights_only, what can't be saved ----------------------------------------


def test_file_objects(tmp_path):
    obj = {"w": plast.randn(3), "k": [1, (2, "x")]}
    buf = io.BytesIO(b"prefix")
    buf.seek(0, io.SEEK_END)
    plast.save(obj, buf)  # written at the position, as torch.save
    buf.seek(len(b"prefix"))
    _same(plast.load(buf), obj)
    with open(tmp_path / "f.safetensors", "wb") as f:
        plast.save(obj, f)
    with open(tmp_path / "f.safetensors", "rb") as f:
        _same(plast.load(f, map_location="cpu"), obj)
    with open(tmp_path / "f.safetensors") as f, pytest.raises(TypeError, match="binary mode"):
        plast.load(f)
    _same(plast.load(str(tmp_path / "f.safetensors")), obj)


def test_map_location_and_weights_only():
    torch = pytest.importorskip("torch")
    obj = {"w": plast.arange(3)}
    buf = io.BytesIO()
    plast.save(obj, buf)
    for kw in (
        {},
        {"weights_only": True},
        {"weights_only": False},
        {"map_location": "cpu"},
        {"map_location": torch.device("cpu")},
        {"map_location": {torch.device("cuda", 0): torch.device("cpu")}},
        {"map_location": lambda storage, loc: storage},
    ):
        buf.seek(0)
        back = plast.load(buf, **kw)
        _same(back, obj)
        assert back["w"].device == "cpu"


class _Module:
    """A model-like object that holds something with no pickle recipe (a lock)."""

    def __init__(self):
        self.lock = threading.Lock()

    def state_dict(self):
        return {}


# Whole objects are stored as their pickle recipe (test_serialization_objects.py); these have none, or no name
@pytest.mark.parametrize("thing", [_Module(), threading.Lock(), (i for i in range(2)), b"bytes", lambda: 0])
def test_unstorable_objects_say_what_to_do(thing):
    with pytest.raises(TypeError, match="pickle is never used|lambda") as e:
        plast.save({"x": thing}, io.BytesIO())
    if isinstance(thing, _Module):
        assert "state_dict()" in str(e.value)


def test_metadata_round_trip_and_reserved_keys():
    buf = io.BytesIO()
    plast.save({"w": plast.ones(1)}, buf, metadata={"epoch": 3, "note": "é"})
    buf.seek(0)
    assert plast.load(buf, with_metadata=True)[1] == {"epoch": "3", "note": "é"}
    for key in ("format", "plast", "plast.payload_sha256", "plast.header_sha256"):
        with pytest.raises(ValueError, match="reserved"):
            plast.save({}, io.BytesIO(), metadata={key: "x"})


def test_torch_reads_plast_files_and_plast_reads_torchs(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    plast.save({"w": plast.ones(2, 3), "b": plast.zeros(2, dtype=plast.float16)}, tmp_path / "p.safetensors")
    got = load_file(str(tmp_path / "p.safetensors"))
    assert torch.equal(got["w"], torch.ones(2, 3)) and got["b"].dtype == torch.float16
    save_file(
        {"x": torch.arange(4, dtype=torch.int32), "e": torch.zeros(0, 3)}, str(tmp_path / "t.safetensors")
    )
    back = plast.load(tmp_path / "t.safetensors")
    assert back["x"].dtype == plast.int32 and back["x"].tolist() == [0, 1, 2, 3] and back["e"].shape == (0, 3)
