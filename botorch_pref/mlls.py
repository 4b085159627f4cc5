"""Re-export of :class:`~botorch_pref.models.evidence.LaplaceEvidence` (home: models)."""

from botorch_pref.models.evidence import LaplaceEvidence

__all__ = ["LaplaceEvidence"]
