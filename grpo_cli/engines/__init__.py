"""Engines run a command over a whole file. ``local`` streams record batches in this process."""
