"""Keeping the dashboard behind the operator token: sessions and CSRF tokens.

The operator token (``--operator-token``, the one the ``/api`` and ``/market`` operator routes
take) is the only credential. The login form trades it for a session cookie; a script may send
it on each request as ``Authorization: Bearer <token>`` instead.

Sessions are stateless, so any worker can check one: the cookie holds an expiry and a nonce with
an HMAC over both, keyed by a key derived from the token and a secret the store keeps in its
database (``storage/secrets.py``). Changing the token logs every session out; a stolen cookie
does not help anyone guess the token offline, since the key also needs the store's secret. A
cookie lives ``SESSION_SECONDS`` at most; logging out clears it in that browser (being
stateless, a copy taken before then stays good until it expires).

CSRF: every form carries a token that is an HMAC of something only the form's own browser holds
— the session cookie for the logout form, a random pre-login cookie for the login form — so a
form posted from another site cannot carry a valid one. The cookies are ``SameSite=Strict`` as
well, and a request whose ``Origin`` or ``Sec-Fetch-Site`` says it comes from elsewhere is
refused before any of this is looked at.

Wrong tokens (at the login form or as a bearer token) count toward the store's one wrong-token
limit per client address (``server/limits.py``), shared with every other route that takes the
operator token and kept in the database, so that every worker counts the same ones. The right
token is never refused by it.

Every comparison of a secret is in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import Callable

from haggler.trust.hashing import is_secret

SESSION_COOKIE = "haggler_admin"
LOGIN_COOKIE = "haggler_admin_login"
COOKIE_PATH = "/admin"
SESSION_SECONDS = 8 * 3600
#: Seconds every failed login waits before it is answered.
FAILURE_DELAY = 0.25


class AdminAuth:
    """Sessions and CSRF tokens for one operator token; disabled (every check fails) without one."""

    def __init__(self, token: str | None, store_secret: bytes, clock: Callable[[], datetime]) -> None:
        self._token = token
        self._key = hmac.new(store_secret, b"haggler admin v1\0" + token.encode(), hashlib.sha256).digest() \
            if token is not None else None
        self.clock = clock

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def token_matches(self, credential: str) -> bool:
        return is_secret(credential, self._token)

    def _mac(self, purpose: str, payload: str) -> str:
        if self._key is None:
            raise RuntimeError("the dashboard has no operator token")
        return hmac.new(self._key, f"{purpose}\0{payload}".encode(), hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        """A fresh session cookie value: ``expiry.nonce.mac``."""
        expires = int(self.clock().timestamp()) + SESSION_SECONDS
        payload = f"{expires}.{secrets.token_urlsafe(16)}"
        return f"{payload}.{self._mac('session', payload)}"

    def session_valid(self, value: str | None) -> bool:
        if not self.enabled or not value or len(value) > 200:
            return False
        payload, _, mac = value.rpartition(".")
        expires, _, nonce = payload.partition(".")
        if not (expires.isdigit() and nonce and hmac.compare_digest(mac, self._mac("session", payload))):
            return False
        return int(expires) > self.clock().timestamp()

    def csrf_token(self, binding: str) -> str:
        """The token a form bound to ``binding`` (a cookie's value) must carry."""
        return self._mac("csrf", binding)

    def csrf_valid(self, binding: str | None, token: str | None) -> bool:
        return bool(self.enabled and binding and token) and hmac.compare_digest(
            token or "", self.csrf_token(binding or ""))


def new_login_nonce() -> str:
    return secrets.token_urlsafe(16)
