"""Inference engines (pure tensor functions)."""
