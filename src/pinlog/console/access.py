"""Who may use the operator console, and how a browser proves it (issue 29).

* **Off unless configured**: :meth:`ConsoleConfig.enabled` — without ``PINLOG_CONSOLE_ADMIN_TOKEN``
  and ``PINLOG_CONSOLE_READ_TOKEN`` the app does not mount ``/console`` at all (404).
* **Login**: the operator types a token; it is compared in constant time with both configured
  tokens (:func:`role_for_token`, ``hmac.compare_digest`` on each, no early exit); the matching
  one decides the role (``admin`` or ``read``).
* **Session**: a signed, expiring cookie (:data:`SESSION_COOKIE`, a JWT HS256: role, session id,
  ``exp``), ``HttpOnly``, ``SameSite=Strict``, ``Path=/console``, ``Secure`` over HTTPS. Its key
  is derived from ``PINLOG_JWT_SECRET`` *and the role's token* (:func:`session_key`), so changing a
  token ends its sessions at once; member tokens cannot be replayed as sessions (other key).
* **CSRF**: every state-changing request (``POST``) carries :func:`csrf_token` — an HMAC of the
  session id under the session key — in a form field; it is compared in constant time
  (:func:`csrf_ok`). The login form has its own double-submit token (:data:`LOGIN_COOKIE`).

Never logged: a token, a cookie, a CSRF value.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import jwt
from pydantic import SecretStr

from pinlog.settings import Settings, reveal

Role = Literal["admin", "read"]

#: The session cookie and the login form's double-submit cookie.
SESSION_COOKIE = "pinlog_console"
LOGIN_COOKIE = "pinlog_console_login"
#: Where the cookies are sent (the console's pages only).
COOKIE_PATH = "/console"
#: Seconds a login form stays valid.
LOGIN_FORM_SECONDS = 600


@dataclass(frozen=True)
class ConsoleConfig:
    """What the console reads (``PINLOG_CONSOLE_*``).

    Attributes:
        admin_token, read_token: the two tokens (either may be unset).
        session_ttl: lifetime of a session (``PINLOG_CONSOLE_SESSION_TTL``).
        refresh: seconds between two live refreshes of the overview (``PINLOG_CONSOLE_REFRESH``).
        key_material: ``PINLOG_JWT_SECRET`` — with the role's token, the session key.
    """

    admin_token: SecretStr | None
    read_token: SecretStr | None
    session_ttl: timedelta
    refresh: float
    key_material: SecretStr | None

    @classmethod
    def from_settings(cls, settings: Settings) -> ConsoleConfig:
        return cls(admin_token=settings.console_admin_token,
                   read_token=settings.console_read_token,
                   session_ttl=settings.console_session_ttl, refresh=settings.console_refresh,
                   key_material=settings.jwt_secret)

    @property
    def enabled(self) -> bool:
        """The console is served only when at least one token is configured."""
        return self.admin_token is not None or self.read_token is not None

    def token(self, role: Role) -> str | None:
        return reveal(self.admin_token if role == "admin" else self.read_token)


@dataclass(frozen=True)
class Session:
    """A logged-in browser: its role and session id (random, 128 bits)."""

    role: Role
    sid: str

    @property
    def admin(self) -> bool:
        return self.role == "admin"


def role_for_token(config: ConsoleConfig, presented: str) -> Role | None:
    """The role whose token ``presented`` is, or None. Constant time: both configured tokens
    are compared (``hmac.compare_digest``) whatever the first answers."""
    given = presented.encode("utf-8")
    found: Role | None = None
    roles: tuple[Role, ...] = ("admin", "read")
    for role in roles:
        token = config.token(role)
        if token is not None and hmac.compare_digest(given, token.encode("utf-8")) and found is None:
            found = role
    return found


def session_key(config: ConsoleConfig, role: Role) -> bytes:
    """The key that signs ``role``'s sessions: HMAC-SHA256 of the role and its token under
    ``PINLOG_JWT_SECRET``; changes when either changes.

    Raises:
        ValueError: the role has no token or there is no JWT secret.
    """
    token, material = config.token(role), reveal(config.key_material)
    if token is None or material is None:
        raise ValueError("no console token for this role")
    return hmac.new(material.encode("utf-8"), f"pinlog-console|{role}|{token}".encode(),
                    hashlib.sha256).digest()


def issue_session(config: ConsoleConfig, role: Role) -> tuple[str, Session]:
    """A new session for ``role``: ``(cookie value, session)``; valid for ``session_ttl``."""
    session = Session(role, secrets.token_urlsafe(16))
    now = int(time.time())
    cookie = jwt.encode({"role": role, "sid": session.sid, "iat": now,
                         "exp": now + int(config.session_ttl.total_seconds())},
                        session_key(config, role), algorithm="HS256")
    return cookie, session


def read_session(config: ConsoleConfig, cookie: str | None) -> Session | None:
    """The session a cookie proves, or None (missing, malformed, expired, signed with another
    key — e.g. the role's token changed since — or naming an unknown role)."""
    if not cookie:
        return None
    try:
        role = jwt.decode(cookie, options={"verify_signature": False}).get("role")
        if role not in ("admin", "read") or config.token(role) is None:
            return None
        claims = jwt.decode(cookie, session_key(config, role), algorithms=["HS256"],
                            options={"require": ["exp", "sid", "role"]})
    except (jwt.PyJWTError, ValueError):
        return None
    sid = claims.get("sid")
    if not isinstance(sid, str) or not sid or claims.get("role") != role:
        return None
    return Session(role, sid)


def csrf_token(config: ConsoleConfig, session: Session) -> str:
    """The CSRF token of ``session`` (hex HMAC of its id under the session key)."""
    return hmac.new(session_key(config, session.role), f"csrf|{session.sid}".encode(),
                    hashlib.sha256).hexdigest()


def csrf_ok(config: ConsoleConfig, session: Session, presented: str | None) -> bool:
    """Constant-time check of a submitted CSRF token."""
    if not presented:
        return False
    return hmac.compare_digest(presented.encode("utf-8"), csrf_token(config, session).encode())


def sign(config: ConsoleConfig, session: Session, payload: str) -> str:
    """An HMAC of ``payload`` bound to ``session`` (e.g. a reprocess dry-run's result, so the
    confirmation can only follow that dry-run)."""
    return hmac.new(session_key(config, session.role), f"sign|{session.sid}|{payload}".encode(),
                    hashlib.sha256).hexdigest()


def signed_ok(config: ConsoleConfig, session: Session, payload: str, signature: str | None) -> bool:
    """Constant-time check of :func:`sign`."""
    return bool(signature) and hmac.compare_digest(
        (signature or "").encode("utf-8"), sign(config, session, payload).encode())
