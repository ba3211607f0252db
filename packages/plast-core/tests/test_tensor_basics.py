"""The first real path: factories, dtypes, devices, numpy round trips, repr, and clear errors on bad input."""

import numpy as np
import pytest

import plast


def test_tensor_infers_like_torch():
    assert plast.tensor([[0, 0], [0, 1]]).dtype == plast.int64
    assert plast.tensor([0.5, 1]).dtype == plast.float32
    assert plast.tensor([True, False]).dtype == plast.bool
    assert plast.tensor(np.zeros(3, np.float64)).dtype == plast.float64
    assert plast.tensor(np.zeros(3, np.int32)).dtype == plast.int32
    assert plast.tensor(3).shape == () and plast.tensor(3).item() == 3
    assert plast.tensor([[1, 2]], dtype=plast.float64).dtype is plast.float64


def test_tensor_copies_and_from_numpy_shares():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = plast.tensor(a)
    s = plast.from_numpy(a)
    a[0, 0] = 100
    assert t.tolist()[0][0] == 0
    assert s.tolist()[0][0] == 100
    assert np.shares_memory(s.numpy(), a)


def test_from_numpy_rejects_bad_arrays():
    with pytest.raises(ValueError, match="C-contiguous"):
        plast.from_numpy(np.zeros((3, 4), np.float32)[:, ::2])
    with pytest.raises(TypeError, match="no plast equivalent"):
        plast.from_numpy(np.zeros(3, np.complex64))
    with pytest.raises(TypeError):
        plast.from_numpy([1, 2, 3])


@pytest.mark.parametrize(
    "bad, exc, match",
    [
        ([[1, 2], [3]], ValueError, "ragged"),
        ("abc", TypeError, "str"),
        (["a", "b"], TypeError, "strings"),
        ([object(), object()], TypeError, "objects"),
        ([1 + 2j], TypeError, "complex"),
    ],
)
def test_tensor_bad_input(bad, exc, match):
    with pytest.raises(exc, match=match):
        plast.tensor(bad)


def test_dtype_and_device_objects():
    t = plast.zeros(2, 3)
    assert t.dtype is plast.float32 and repr(t.dtype) == "plast.float32"
    assert t.device == "cpu" and t.device == plast.Device.CPU and t.device == plast.device("cpu")
    assert t.device != "cuda"
    assert t.shape == (2, 3) and isinstance(t.shape, tuple) and t.ndim == 2 and t.numel() == 6


def test_factories():
    assert plast.ones(2, 2).tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert plast.full((2,), 7).tolist() == [7, 7] and plast.full((2,), 7).dtype == plast.int64
    assert plast.full((1,), 0.5).dtype == plast.float32
    assert plast.arange(5).tolist() == [0, 1, 2, 3, 4] and plast.arange(5).dtype == plast.int64
    np.testing.assert_allclose(plast.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    assert plast.arange(0, 1, 0.25).dtype == plast.float32
    assert plast.zeros((0, 3)).shape == (0, 3)
    assert plast.eye(2).tolist() == [[1, 0], [0, 1]]
    assert plast.zeros_like(plast.ones(2, dtype=plast.float64)).dtype == plast.float64
    with pytest.raises(ValueError):
        plast.zeros(-1)
    with pytest.raises(TypeError):
        plast.zeros(2.5)


def test_random_is_seeded_and_shaped():
    plast.manual_seed(0)
    a = plast.rand(1000).numpy()
    b = plast.randn(1000).numpy()
    plast.manual_seed(0)
    np.testing.assert_array_equal(plast.rand(1000).numpy(), a)
    np.testing.assert_array_equal(plast.randn(1000).numpy(), b)
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.05
    assert abs(b.mean()) < 0.15 and abs(b.std() - 1) < 0.1
    # a private generator is independent of the global one
    g = plast.Generator().manual_seed(0)
    np.testing.assert_array_equal(plast.rand(1000, generator=g).numpy(), a)
    # state round trip
    state = plast.get_rng_state()
    x = plast.randn(17, dtype=plast.float64).numpy()
    plast.set_rng_state(state)
    np.testing.assert_array_equal(plast.randn(17, dtype=plast.float64).numpy(), x)
    r = plast.randint(3, 9, (10_000,)).numpy()
    assert r.min() == 3 and r.max() == 8


def test_philox_known_answer():
    # Philox4x32-10 test vector (Random123 kat_vectors): counter 0, key 0.
    from plast.kernels.cpu import _kernels

    assert _kernels.philox_block(0, 0) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)


def test_elementwise_promotion_and_broadcasting():
    x = plast.tensor([[0, 1], [2, 3]])
    w = plast.tensor([0.5, 2.0])
    y = x * w
    assert y.dtype == plast.float32
    np.testing.assert_allclose(y.numpy(), np.array([[0, 2], [1, 6]], np.float32))
    assert (x + 1).dtype == plast.int64
    assert (x + 1.5).dtype == plast.float32
    assert (x / 2).dtype == plast.float32 and (x / 2).tolist() == [[0, 0.5], [1, 1.5]]
    assert (2 - x).tolist() == [[2, 1], [0, -1]]
    with pytest.raises(plast.ShapeError, match=r"\(2, 2\) and \(3,\)"):
        x + plast.ones(3)


def test_numpy_roundtrip_and_array_protocol():
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    t = plast.tensor(a)
    np.testing.assert_array_equal(np.asarray(t), a)
    np.testing.assert_array_equal(t.numpy(), a)
    out = (t * 2).numpy()
    np.testing.assert_array_equal(out, a * 2)
    out[0, 0] = 1e9  # a copy of transient memory: writing it changes nothing in plast
    assert np.array_equal(a + 1, (t + 1).numpy())


def test_repr():
    assert repr(plast.tensor([1, 2])) == "tensor([1, 2])"
    assert "dtype=plast.float64" in repr(plast.tensor([1.0], dtype=plast.float64))
    assert repr(plast.zeros(2, 0)).endswith("size=(2, 0))")


def test_lazy_values_are_computed_once():
    a = plast.tensor([1.0, 2.0])
    b = a * 3
    assert b._storage is None
    first = b.tolist()
    st = b._storage
    assert b.tolist() == first and b._storage is st


def test_view_and_reshape():
    t = plast.arange(12).reshape(3, 4)
    assert t.view(4, 3).tolist() == np.arange(12).reshape(4, 3).tolist()
    assert t.reshape(-1, 6).shape == (2, 6)
    with pytest.raises(plast.ShapeError, match="invalid for input of size 12"):
        t.view(5, 3)


def test_promotion_matches_torch_including_0d_and_scalars():
    torch = pytest.importorskip("torch")
    kinds = {
        "bool": (plast.bool, torch.bool),
        "int32": (plast.int32, torch.int32),
        "int64": (plast.int64, torch.int64),
        "float32": (plast.float32, torch.float32),
        "float64": (plast.float64, torch.float64),
    }
    for a_name, (pa, ta) in kinds.items():
        for b_name, (pb, tb) in kinds.items():
            for a_shape, b_shape in (((3,), ()), ((), (3,)), ((3,), (3,)), ((), ())):
                x = plast.ones(a_shape, dtype=pa) if a_shape else plast.tensor(1, dtype=pa)
                y = plast.ones(b_shape, dtype=pb) if b_shape else plast.tensor(1, dtype=pb)
                xt = torch.ones(a_shape, dtype=ta)
                yt = torch.ones(b_shape, dtype=tb)
                want = str((xt * yt).dtype).replace("torch.", "")
                assert (x * y).dtype.name == want, (a_name, a_shape, b_name, b_shape)
            for s in (True, 2, 2.5):
                t = plast.ones(3, dtype=pa)
                want = str((torch.ones(3, dtype=ta) * s).dtype).replace("torch.", "")
                assert (t * s).dtype.name == want, (a_name, s)


def test_bool_arithmetic_is_logical():
    a = plast.tensor([True, False, True])
    b = plast.tensor([True, True, False])
    assert (a * b).tolist() == [True, False, False] and (a + b).tolist() == [True, True, True]
    with pytest.raises(TypeError, match="bool"):
        a - b


def test_cuda_status_is_reported_without_importing_pycuda():
    import sys

    assert isinstance(plast.cuda.is_available(), bool)
    if not plast.cuda.is_available():
        assert plast.cuda.unavailable_reason()
        import io

        buf = io.StringIO()
        plast.show_config(file=buf)
        assert "cuda              unavailable: " in buf.getvalue()
    assert "pycuda.autoinit" not in sys.modules


def test_shapes_are_sizes_outside_and_exact_tuples_inside():
    """``.shape`` and ``.size()`` are plast.Size, as torch's; the field the compiled code indexes is an exact tuple
    (a tuple subclass would cost a Python-level call per item read from C), and follows ``.data =``."""
    t = plast.ones(2, 3) * 2.0
    assert (
        type(t.shape) is plast.Size and type(t.size()) is plast.Size and repr(t.shape) == "plast.Size([2, 3])"
    )
    assert t.shape is t.shape  # made once
    assert type(t._shape) is tuple and t.size(1) == 3 and t.size(-1) == 3
    assert type(t.T._shape) is tuple and t.T.shape == (3, 2)
    t.data = plast.zeros(4)
    assert t.shape == (4,) and type(t.shape) is plast.Size and t.tolist() == [0.0] * 4
