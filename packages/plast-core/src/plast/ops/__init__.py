"""The op layer: argument checks, shape and dtype rules, and recording of nodes (DESIGN §2, §4)."""
