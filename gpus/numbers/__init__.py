"""The numbers: pure functions from cluster objects to counts, findings and pictures (no Django, no I/O)."""
