"""A real SMTP server on a free loopback port (aiosmtpd), as a store's operator's mail server:
``messages`` holds each message it took, parsed; it answers ``refusals`` first (one SMTP reply a
message, e.g. ``"451 4.3.0 try later"``), then takes every message. With ``login`` (user,
password) it requires AUTH (offered without TLS: it offers no STARTTLS) and keeps every login tried
in ``logins``."""

from __future__ import annotations

import email
import email.policy
import threading
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from haggler.server.threaded import free_port


class MailServer:
    def __init__(self, *refusals: str, login: tuple[str, str] | None = None) -> None:
        self.logins: list[tuple[str, str]] = []
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self.refused = 0
        self._refusals = list(refusals)
        self._lock = threading.Lock()
        auth = {"auth_required": True, "auth_require_tls": False,
                "authenticator": self._authenticate} if login is not None else {}
        self._login = login
        self._controller = Controller(self, hostname="127.0.0.1", port=free_port(), **auth)

    def _authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        tried = (data.login.decode(), data.password.decode())
        with self._lock:
            self.logins.append(tried)
        return AuthResult(success=tried == self._login)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        with self._lock:
            if self._refusals:
                self.refused += 1
                return self._refusals.pop(0)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            self.messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
        return "250 OK"

    @property
    def url(self) -> str:
        return f"smtp+plain://127.0.0.1:{self._controller.port}"

    def __enter__(self) -> "MailServer":
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()
