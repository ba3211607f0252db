"""Test tooling that ships with plast (as torch.testing does): ``plast.testing.fake_cuda`` puts a host-memory
"GPU" behind the CUDA backend so data movement can be tested on machines without one."""
