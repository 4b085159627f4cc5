"""Single-use form nonces: every POST must carry one that a page of the same scope issued.

A page embeds a fresh nonce in each of its forms; the POST that carries it consumes it. A nonce
that was never issued for that scope (forged, from another session's page, from before a
restart) is *unknown*; one that was already used is *replayed*. Nonces live in memory, at most
``max_per_scope`` per scope (the oldest are dropped) and for ``ttl_s`` seconds.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from enum import Enum

__all__ = ["NonceStatus", "NonceStore"]


class NonceStatus(Enum):
    """What :meth:`NonceStore.consume` found."""

    OK = "ok"
    UNKNOWN = "unknown"
    REPLAYED = "replayed"


class NonceStore:
    """Issues and consumes nonces (thread-safe).

    Args:
        ttl_s: Seconds a nonce stays valid.
        max_per_scope: Most live nonces per scope.
    """

    def __init__(self, ttl_s: float = 6 * 3600.0, max_per_scope: int = 256) -> None:
        self.ttl_s = ttl_s
        self.max_per_scope = max_per_scope
        self._live: dict[str, OrderedDict[str, float]] = {}
        self._used: dict[str, OrderedDict[str, float]] = {}
        self._lock = threading.Lock()

    def issue(self, scope: str) -> str:
        """A new nonce for a form of ``scope``.

        Args:
            scope: What the form acts on (``"admin"`` or a session's record id).

        Returns:
            The nonce.
        """
        nonce = secrets.token_urlsafe(18)
        with self._lock:
            live = self._live.setdefault(scope, OrderedDict())
            live[nonce] = time.monotonic() + self.ttl_s
            while len(live) > self.max_per_scope:
                live.popitem(last=False)
        return nonce

    def consume(self, scope: str, nonce: str | None) -> NonceStatus:
        """Use a nonce up.

        Args:
            scope: The scope the POST acts on.
            nonce: The nonce it carries.

        Returns:
            ``OK`` (now used), ``REPLAYED`` (used before) or ``UNKNOWN``.
        """
        if not nonce:
            return NonceStatus.UNKNOWN
        now = time.monotonic()
        with self._lock:
            live = self._live.get(scope)
            expires = None if live is None else live.pop(nonce, None)
            used = self._used.setdefault(scope, OrderedDict())
            if expires is not None and expires >= now:
                used[nonce] = now + self.ttl_s
                while len(used) > 4 * self.max_per_scope:
                    used.popitem(last=False)
                return NonceStatus.OK
            if nonce in used:
                return NonceStatus.REPLAYED
            return NonceStatus.UNKNOWN

    def release(self, scope: str, nonce: str | None) -> None:
        """Make a consumed nonce usable again: its POST changed nothing (e.g. a busy database),
        so sending the same form again is a retry, not a replay.

        Args:
            scope: The scope the POST acts on.
            nonce: The nonce it carried.
        """
        with self._lock:
            used = self._used.get(scope)
            if nonce and used is not None and used.pop(nonce, None) is not None:
                self._live.setdefault(scope, OrderedDict())[nonce] = time.monotonic() + self.ttl_s
