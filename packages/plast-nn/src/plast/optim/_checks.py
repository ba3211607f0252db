"""Constructor argument checks shared by the optimizers, raising torch's exceptions with torch's messages."""


def check_nonnegative(**values):
    """Raise torch's ValueError for the first negative value: ``Invalid <name>: <value>``."""
    for name, v in values.items():
        if not 0.0 <= v:
            raise ValueError(f"Invalid {name.replace('_', ' ')}: {v}")


def check_betas(betas):
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def reject_differentiable(name, differentiable):
    if differentiable:
        raise NotImplementedError(f"{name}(differentiable=True) is not supported by plast")
