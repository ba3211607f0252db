"""Arenas: where tensor memory comes from (DESIGN §3)."""
