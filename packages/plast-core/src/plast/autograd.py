"""plast.autograd: the torch.autograd names."""

from .engine.autograd import backward, enable_grad, grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .engine.autograd_state import anomaly_detection as _anomaly  # noqa: F401


def set_detect_anomaly(mode):
    """Check every op's output for NaN while realizing (slow; for debugging)."""
    raise NotImplementedError(
        "set_detect_anomaly is not implemented yet (plast-core engine I, still open): it will check each "
        "kernel's output for NaN and name the op that produced it"
    )


__all__ = ["backward", "grad", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled",
           "set_detect_anomaly"]
