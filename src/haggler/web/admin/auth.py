"""Keeping the dashboard behind the operator token: sessions, CSRF tokens and a login throttle.

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

Failed logins are counted per client address in the database (``LoginThrottle``), so that every
worker counts the same ones.

Every comparison of a secret is in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta
from typing import Callable

from sqlalchemy import Connection, delete, select

from haggler.storage.counters import count_one
from haggler.storage.database import Database, lock_key
from haggler.storage.schema import rate_windows
from haggler.trust.hashing import is_secret

SESSION_COOKIE = "haggler_admin"
LOGIN_COOKIE = "haggler_admin_login"
COOKIE_PATH = "/admin"
SESSION_SECONDS = 8 * 3600
#: Failed logins one client may make within ``FAILURE_WINDOW`` before it must wait.
MAX_FAILURES = 5
FAILURE_WINDOW = timedelta(minutes=15)
#: Seconds every failed login waits before it is answered.
FAILURE_DELAY = 0.25
#: What sets the throttle's keys in ``rate_windows`` apart from agents.json's client addresses.
LOGIN_KEY_PREFIX = "admin-login:"


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


class LoginThrottle:
    """Failed logins per client address, counted in the database so that N workers allow exactly
    what one does: after ``MAX_FAILURES`` within ``FAILURE_WINDOW`` the client waits until the
    oldest of them leaves the window, and a success forgets its failures.

    Each failure is a row of ``rate_windows`` keyed ``admin-login:<address>``, stamped with when
    it leaves the window rather than when it happened: the agents.json sweep, which forgets the
    rows whose time passed two minutes ago, then forgets a failure only once it no longer counts.
    Judging an attempt and counting it is one transaction that holds the client's key, so
    attempts racing on several workers cannot all squeeze under the limit."""

    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self.db = db
        self.clock = clock

    def attempt(self, client: str, *, succeeded: bool) -> int | None:
        """Judge a login attempt by ``client`` whose token was right (``succeeded``) or wrong:
        the seconds it must wait first (the attempt is refused, and not counted), or None when
        it was let through — a wrong token then counts as a failure."""
        key = LOGIN_KEY_PREFIX + client
        now = self.clock()
        if succeeded:
            with self.db.read() as conn:
                leaving = self._leaving(conn, key, now)
            wait = self._wait(leaving, now)
            if wait is None and leaving:
                with self.db.write() as conn:
                    conn.execute(delete(rate_windows).where(rate_windows.c.client == key))
            return wait
        with self.db.write() as conn:
            lock_key(conn, key)
            leaving = self._leaving(conn, key, now)
            wait = self._wait(leaving, now)
            if wait is None:
                count_one(conn, key, now + FAILURE_WINDOW)
        return wait

    @staticmethod
    def _leaving(conn: Connection, key: str, now: datetime) -> list[tuple[datetime, int]]:
        """When each failure still in the window leaves it, and how many left at that instant."""
        rows = conn.execute(select(rate_windows.c.window_start, rate_windows.c.count)
                            .where(rate_windows.c.client == key, rate_windows.c.window_start > now)
                            .order_by(rate_windows.c.window_start))
        return [(at, count) for at, count in rows]

    @staticmethod
    def _wait(leaving: list[tuple[datetime, int]], now: datetime) -> int | None:
        if sum(count for _, count in leaving) < MAX_FAILURES:
            return None
        return max(1, int((leaving[0][0] - now).total_seconds()) + 1)
