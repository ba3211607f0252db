"""``import torch`` in a process that multiprocessing started with spawn or forkserver from a program running on
plast through plast.torch (a DataLoader's workers): that process re-imports the program's ``__main__``, which
imports torch before anything of plast.torch has run there.

plast.torch.install() puts this file's parent directory first on ``sys.path``, and a spawned process gets the
parent's ``sys.path``: so its ``import torch`` finds this module, which installs the alias and hands over to it,
and ``torch`` is plast there too. The parent itself never reaches this file (the alias's finder comes first).
Imported under any other name (``plast.torch._spawn_path.torch``, by a tool that walks every module), it does
nothing.
"""

import sys

if __name__ == "torch":
    import plast.torch as _alias

    del sys.modules["torch"]  # this module: the alias's torch takes its place
    _alias.install()
    __import__("torch")  # the import system returns what sys.modules["torch"] holds now: plast's torch
