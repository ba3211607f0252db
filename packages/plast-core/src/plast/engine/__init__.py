"""The engine: graph nodes, the scheduler that realizes them, and autograd."""
