"""Benchmarks of botorch-pref, run as modules from the repository root:
``python -m benchmarks.pbo ...`` (each module's docstring gives its commands)."""
