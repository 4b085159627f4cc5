"""Integrations with flows outside this package: BoTorch's BOPE loop and Ax (optional extra)."""
