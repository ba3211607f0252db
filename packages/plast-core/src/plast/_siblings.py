"""Clear errors for plast subpackages that live in other distributions.

``import plast.nn`` goes through the import system, not through ``plast.__getattr__``, so a missing plast-nn
would otherwise surface as a bare "No module named 'plast.nn'". This finder sits at the end of
``sys.meta_path``: it is consulted only after every real finder (site-packages, editable installs) has failed,
and then raises ModuleNotFoundError naming the distribution to install.
"""

import importlib.abc
import sys

# subpackage -> distribution that ships it
SIBLINGS = {
    "plast.nn": "plast-nn",
    "plast.optim": "plast-nn",
    "plast.data": "plast-data",
    "plast.experiment": "plast-experiment",
}


def missing_message(name: str) -> str:
    dist = SIBLINGS[name]
    return (
        f"No module named {name!r}: it ships in the {dist} distribution, which is not installed. "
        f"Install it next to plast-core from the plast repository, e.g. "
        f"`pip install packages/plast-core packages/{dist}` (one command, so pip never looks it up elsewhere)."
    )


class _SiblingFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in SIBLINGS:
            raise ModuleNotFoundError(missing_message(fullname), name=fullname)
        return None


def install() -> None:
    if not any(isinstance(f, _SiblingFinder) for f in sys.meta_path):
        sys.meta_path.append(_SiblingFinder())
