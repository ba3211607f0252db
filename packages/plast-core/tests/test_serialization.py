"""plast.save / plast.load: round trips, interop with torch's safetensors files, damaged files, atomic writes."""

import os

import numpy as np
import pytest

import plast


def test_nested_round_trip_is_exact(tmp_path):
    plast.manual_seed(0)
    obj = {
        "model": {"w": plast.randn(3, 4), "b": plast.zeros(4, dtype=plast.float64)},
        "optim": {
            "state": {0: {"step": plast.tensor(5.0), "exp_avg": plast.randn(3, 4)}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0], "name": None}],
        },
        "rng": plast.get_rng_state(),
        "ids": plast.tensor([1, 2, 3]),
        "mask": plast.tensor([True, False]),
        "step": 7,
        "inf": float("inf"),
    }
    p = tmp_path / "ckpt.safetensors"
    plast.save(obj, p)
    back = plast.load(p)
    np.testing.assert_array_equal(back["model"]["w"].numpy(), obj["model"]["w"].numpy())
    assert back["model"]["b"].dtype == plast.float64
    assert back["optim"]["state"][0]["step"].item() == 5.0
    assert back["optim"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert back["optim"]["param_groups"][0]["name"] is None
    assert back["ids"].dtype == plast.int64 and back["mask"].dtype == plast.bool
    assert back["step"] == 7 and back["inf"] == float("inf")
    np.testing.assert_array_equal(back["rng"].numpy(), obj["rng"].numpy())


def test_non_contiguous_tensors_are_saved_by_value(tmp_path):
    t = plast.arange(12).reshape(3, 4).float().T
    plast.save({"t": t}, tmp_path / "t.safetensors")
    np.testing.assert_array_equal(plast.load(tmp_path / "t.safetensors")["t"].numpy(), t.numpy())


def test_torch_interop(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    sd = {"weight": torch.randn(2, 3), "bias": torch.randn(2)}
    save_file(sd, str(tmp_path / "torch.safetensors"))
    back = plast.load(tmp_path / "torch.safetensors")
    np.testing.assert_array_equal(back["weight"].numpy(), sd["weight"].numpy())
    plast.save({"weight": plast.ones(2, 3)}, tmp_path / "plast.safetensors")
    assert torch.equal(load_file(str(tmp_path / "plast.safetensors"))["weight"], torch.ones(2, 3))


def test_damaged_files_raise_checkpoint_error(tmp_path):
    p = tmp_path / "good.safetensors"
    plast.save({"w": plast.randn(100), "meta": {"a": 1}}, p)
    data = p.read_bytes()
    for name, bad in [
        ("truncated", data[: len(data) // 2]),
        ("empty", b""),
        ("garbage", b"\x00" * 64),
        ("lying-header", (10**12).to_bytes(8, "little") + data[8:]),
    ]:
        q = tmp_path / f"{name}.safetensors"
        q.write_bytes(bad)
        with pytest.raises(plast.CheckpointError):
            plast.load(q)
    with pytest.raises(plast.CheckpointError, match="no such file"):
        plast.load(tmp_path / "missing.safetensors")


def test_write_is_atomic(tmp_path, monkeypatch):
    from plast import serialization

    p = tmp_path / "ckpt.safetensors"
    plast.save({"w": plast.ones(3)}, p)

    def boom(f, header, chunks):
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(serialization, "_write_to", boom)
    with pytest.raises(KeyboardInterrupt):
        plast.save({"w": plast.zeros(3)}, p)
    assert plast.load(p)["w"].tolist() == [1.0, 1.0, 1.0]
    assert [f for f in os.listdir(tmp_path) if f.startswith(".plast-save-")] == []


def test_unsupported_objects_are_refused(tmp_path):
    # objects are stored as their pickle recipe (test_serialization_objects.py); a generator has none
    with pytest.raises(TypeError, match="pickle is never used"):
        plast.save({"f": (i for i in range(3))}, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


# ---- devices and map_location (CPU-only checks; the fake-GPU ones are in test_cuda_wiring.py) ----------------


def _file_with_device(path, device):
    """A plast file whose tree says tensor "w" was saved from `device` (what plast.save writes for GPU tensors)."""
    import json

    from plast import serialization

    tree = {"w": {"__tensor__": "w", "device": device}, "b": {"__tensor__": "b"}}
    meta = {"format": serialization.FORMAT, serialization._TREE_KEY: json.dumps(tree)}
    tensors = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(2)}
    header, chunks = serialization._serialize(tensors, meta)  # with the checksums a plast file carries
    with open(path, "wb") as f:
        serialization._write_to(f, header, chunks)


@pytest.fixture
def cuda_missing(monkeypatch):
    import plast._core.cuda_driver as cuda_backend
    from plast.memory import arenas as _arenas

    saved = _arenas._arenas.pop("cuda", None)
    monkeypatch.setattr(cuda_backend, "_probe", (False, "no CUDA device found", {}))
    yield
    _arenas._arenas.pop("cuda", None)
    if saved is not None:
        _arenas._arenas["cuda"] = saved


def test_cpu_tensors_are_saved_without_a_device(tmp_path):
    import json

    from safetensors import safe_open

    plast.save({"w": plast.ones(2), "n": {"s": plast.zeros(())}}, tmp_path / "c.safetensors")
    with safe_open(str(tmp_path / "c.safetensors"), framework="numpy") as f:
        tree = json.loads(f.metadata()["plast"])
    assert tree == {"w": {"__tensor__": "w"}, "n": {"s": {"__tensor__": "n.s"}}}


def test_gpu_file_without_a_gpu_says_to_map_to_cpu(tmp_path, cuda_missing):
    """As torch.load: the default restores the saved device, and a missing GPU is an error with the way out."""
    p = tmp_path / "gpu.safetensors"
    _file_with_device(p, "cuda")
    with pytest.raises(plast.cuda.CudaUnavailableError, match=r"map_location='cpu'") as e:
        plast.load(p)
    assert "no CUDA device found" in str(e.value)
    for loc in ("cpu", plast.device("cpu"), {"cuda:0": "cpu"}, {"cuda": "cpu"}, lambda t, loc: t):
        back = plast.load(p, map_location=loc)
        assert back["w"].device == "cpu" and back["b"].device == "cpu"
        assert back["w"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    with pytest.raises(plast.cuda.CudaUnavailableError, match="no CUDA device found"):
        plast.load(p, map_location="cuda")
    back, meta = plast.load(p, map_location="cpu", with_metadata=True)
    assert back["b"].dtype == plast.float64 and meta == {}


def test_map_location_on_cpu_files(tmp_path):
    p = tmp_path / "cpu.safetensors"
    plast.save({"w": plast.arange(3)}, p)
    for loc in (None, "cpu", {"cuda": "cpu"}, lambda t, loc: None, lambda t, loc: t * 2):
        back = plast.load(p, map_location=loc)
        assert back["w"].device == "cpu"
    assert plast.load(p, map_location=lambda t, loc: t * 2)["w"].tolist() == [0, 2, 4]
    assert plast.load(p, None)["w"].tolist() == [0, 1, 2]  # positional, as torch.load(f, map_location)


def test_bad_map_location_and_devices(tmp_path):
    p = tmp_path / "cpu.safetensors"
    plast.save({"w": plast.ones(2)}, p)
    with pytest.raises(TypeError, match="map_location must be"):
        plast.load(p, map_location=3)
    with pytest.raises(ValueError, match="unknown device"):
        plast.load(p, map_location="tpu")
    with pytest.raises(TypeError, match="must return a tensor or None"):
        plast.load(p, map_location=lambda t, loc: t.numpy())
    bad = tmp_path / "bad.safetensors"
    _file_with_device(bad, "tpu:3")
    with pytest.raises(plast.CheckpointError, match="unknown device 'tpu:3'"):
        plast.load(bad)
    with pytest.raises(plast.CheckpointError, match="unknown device"):
        plast.load(bad, map_location={"cpu": "cpu"})  # a mapping that needs the saved location reads it
    assert plast.load(bad, map_location="cpu")["w"].device == "cpu"  # one that doesn't, doesn't (as torch)
