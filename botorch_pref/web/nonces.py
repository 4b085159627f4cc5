"""Single-use form nonces: every POST must carry one that a page of the same scope issued.

A page embeds a fresh nonce in each of its forms; the POST that carries it consumes it. A nonce
is ``<issued>.<random>.<signature>``, signed with the server's key (the database's link key,
:mod:`~botorch_pref.sessions.answer_links`) for its scope: a page opened before a restart keeps
working after it, while a nonce that was never issued for that scope (forged, from another session's
page, expired after ``ttl_s`` seconds) is *unknown*. One that was already used is *replayed*;
the used ones are remembered in memory (at most ``4 * max_per_scope`` per scope). After a
restart the form itself says what it acts on — an answer names its query, an undo the counts
its page showed, a new session its name — so a form sent twice across a restart still changes
nothing the second time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
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
        key: The signing key (default: a random one, so nonces die with the process).
        ttl_s: Seconds a nonce stays valid.
        max_per_scope: Sets how many used nonces are remembered per scope (four times this).
    """

    def __init__(
        self, key: bytes | None = None, ttl_s: float = 6 * 3600.0, max_per_scope: int = 256
    ) -> None:
        self.key = secrets.token_bytes(32) if key is None else key
        self.ttl_s = ttl_s
        self.max_per_scope = max_per_scope
        self._used: dict[str, OrderedDict[str, float]] = {}
        self._lock = threading.Lock()

    def _sign(self, scope: str, body: str) -> str:
        mac = hmac.new(self.key, f"nonce:{scope}:{body}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:18]).decode()

    def issue(self, scope: str) -> str:
        """A new nonce for a form of ``scope``.

        Args:
            scope: What the form acts on (``"admin"`` or a session's record id).

        Returns:
            The nonce.
        """
        body = f"{int(time.time())}.{secrets.token_urlsafe(12)}"
        return f"{body}.{self._sign(scope, body)}"

    def consume(self, scope: str, nonce: str | None) -> NonceStatus:
        """Use a nonce up.

        Args:
            scope: The scope the POST acts on.
            nonce: The nonce it carries.

        Returns:
            ``OK`` (now used), ``REPLAYED`` (used before) or ``UNKNOWN``.
        """
        if not nonce or len(nonce) > 100 or nonce.count(".") != 2:
            return NonceStatus.UNKNOWN
        body, _, signature = nonce.rpartition(".")
        issued = body.partition(".")[0]
        if not (issued.isascii() and issued.isdigit()) or not hmac.compare_digest(
            signature.encode(), self._sign(scope, body).encode()
        ):
            return NonceStatus.UNKNOWN
        now = time.time()
        if int(issued) + self.ttl_s < now:
            return NonceStatus.UNKNOWN
        with self._lock:
            used = self._used.setdefault(scope, OrderedDict())
            if nonce in used:
                return NonceStatus.REPLAYED
            used[nonce] = now
            while len(used) > 4 * self.max_per_scope:
                used.popitem(last=False)
        return NonceStatus.OK

    def release(self, scope: str, nonce: str | None) -> None:
        """Make a consumed nonce usable again: its POST changed nothing (e.g. a busy database),
        so sending the same form again is a retry, not a replay.

        Args:
            scope: The scope the POST acts on.
            nonce: The nonce it carried.
        """
        with self._lock:
            used = self._used.get(scope)
            if nonce and used is not None:
                used.pop(nonce, None)
