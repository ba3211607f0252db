"""plast.torch: ``import torch`` resolved to plast (aliasing only) and ``python -m plast.torch SCRIPT``. Each check
runs in a fresh interpreter: the test process imports the real torch as its oracle."""

import subprocess
import sys
import textwrap

import pytest


def _run(code, *args, cwd=None, module=True):
    if module:
        cmd = [sys.executable, "-m", "plast.torch", "script.py", *args]
    else:
        cmd = [sys.executable, "-c", "import plast.torch; plast.torch.install()\n" + textwrap.dedent(code)]
    if module:
        (cwd / "script.py").write_text(textwrap.dedent(code))
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_modules_are_plasts(tmp_path):
    code = """
        import sys
        import plast, torch, torch.autograd, torch.cuda, torch.amp, torch.backends, torch.distributed
        import torch.linalg, torch.random, torch.serialization, torch.accelerator
        assert torch.Tensor is plast.Tensor and torch.float32 is plast.float32
        for name in ("autograd", "cuda", "amp", "backends", "distributed", "linalg", "random", "serialization",
                     "accelerator"):
            assert sys.modules["torch." + name] is getattr(plast, name), name
            assert getattr(torch, name) is getattr(plast, name), name
        print(sys.argv[1:], __name__, torch.ones(2).tolist())
    """
    assert _run(code, "--lr", "3", cwd=tmp_path).split() == ["['--lr',", "'3']", "__main__", "[1.0,", "1.0]"]


def test_autograd_function_module_is_plasts(tmp_path):
    # custom autograd code imports once_differentiable from torch.autograd.function
    code = """
        import plast
        from torch.autograd import Function
        from torch.autograd.function import FunctionCtx, once_differentiable
        assert Function is plast.autograd.Function and once_differentiable is plast.autograd.function.once_differentiable
        print("ok")
    """
    assert _run(code, cwd=tmp_path).split() == ["ok"]


def test_missing_names_raise_naming_them(tmp_path):
    code = """
        import torch
        try:
            torch.fft
        except AttributeError as e:
            print(e)
        try:
            import torch.fx
        except ModuleNotFoundError as e:
            print(e)
        try:
            from torch.utils import checkpoint
        except ImportError as e:
            print("checkpoint" in str(e))
        import torch.onnx  # scripts import it at the top and use it only on request
        from torch.onnx import export
        try:
            export(None, None, "m.onnx")
        except NotImplementedError as e:
            print(e)
    """
    out = _run(code, cwd=tmp_path).splitlines()
    assert out == [
        "plast does not implement torch.fft",
        "plast does not implement torch.fx",
        "True",
        "plast does not implement torch.onnx.export",
    ]


def test_tensorboard_is_tensorboardx_or_import_error(tmp_path):
    code = """
        try:
            from torch.utils.tensorboard import SummaryWriter
            import tensorboardX
            print(SummaryWriter is tensorboardX.SummaryWriter)
        except ImportError as e:
            print("tensorboardX" in str(e))
    """
    assert _run(code, cwd=tmp_path).strip() == "True"


def test_install_in_process_and_refuses_real_torch():
    code = """
        import torch.linalg as L  # a core module: this suite also runs without plast-nn installed
        import plast.linalg
        assert L is plast.linalg
        plast.torch.uninstall()
        import sys
        assert "torch" not in sys.modules
        import importlib.util
        if importlib.util.find_spec("torch") is not None:
            import torch
            try:
                plast.torch.install()
            except ImportError as e:
                print("already imported" in str(e))
        else:
            print(True)
    """
    assert _run(code, module=False).strip() == "True"


def test_usage_without_script():
    out = subprocess.run([sys.executable, "-m", "plast.torch"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "usage" in out.stderr


def test_backends_cuda_accelerator_match_torch_without_gpu():
    torch = pytest.importorskip("torch")
    import plast

    if torch.cuda.is_available() or plast.cuda.is_available():
        pytest.skip("compares the no-GPU answers")
    assert plast.accelerator.is_available() is torch.accelerator.is_available() is False
    assert plast.accelerator.current_accelerator() is torch.accelerator.current_accelerator() is None
    assert plast.accelerator.device_count() == torch.accelerator.device_count() == 0
    assert plast.cuda.is_bf16_supported() == torch.cuda.is_bf16_supported() is False
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(plast.backends.cudnn, name) == getattr(torch.backends.cudnn, name), name
    assert plast.backends.cudnn.is_available() == torch.backends.cudnn.is_available()
    assert plast.backends.mps.is_available() == torch.backends.mps.is_available() is False
    assert plast.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32
    # no GPU: cuda.manual_seed leaves the (one, shared) generator alone, as torch leaves its CPU generator
    plast.manual_seed(3)
    a = plast.rand(4).tolist()
    plast.manual_seed(3)
    plast.cuda.manual_seed(7)
    plast.cuda.manual_seed_all(7)
    assert plast.rand(4).tolist() == a
    with pytest.raises(ValueError, match="one GPU"):
        plast.cuda.set_device(1)


def test_missing_distribution_is_named():
    # as if plast-nn and plast-data were not installed: a finder ahead of the others refuses their modules
    code = """
        import importlib.abc, sys

        class Hide(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[:2] in (["plast", "nn"], ["plast", "optim"], ["plast", "data"]):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, Hide())
        import torch
        print(torch.ones(1).tolist())
        for mod in ("torch.nn", "torch.nn.functional", "torch.optim", "torch.utils.data"):
            try:
                __import__(mod)
            except ModuleNotFoundError as e:
                print(e)
    """
    out = _run(code, module=False).splitlines()
    assert out[0] == "[1.0]"
    assert "torch.nn is plast.nn under plast, which ships in the plast-nn distribution" in out[1]
    assert "plast-nn" in out[2] and "plast-nn" in out[3]
    assert "torch.utils.data is plast.data under plast, which ships in the plast-data distribution" in out[4]


def test_a_spawned_process_gets_the_alias_through_sys_path(tmp_path):
    # what multiprocessing's spawn does in a child: sys.path from the parent (which install() prepared), then
    # the program's `import torch`, with no plast.torch code run before it
    code = (
        "import sys, plast.torch as a; a.install(); assert sys.path[0] == a.SPAWN_PATH; "
        "a.uninstall(); assert a.SPAWN_PATH not in sys.path; "
        "sys.path.insert(0, a.SPAWN_PATH); import torch, plast; "
        "assert torch.float32 is plast.float32 and type(torch.ones(1)) is plast.Tensor; "
        "print('ok')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
