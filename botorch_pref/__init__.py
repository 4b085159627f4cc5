"""botorch-pref: preferential Bayesian optimisation for BoTorch."""

__version__ = "0.1.0.dev0"

