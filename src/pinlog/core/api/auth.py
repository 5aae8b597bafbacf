"""Member tokens: JWT (PyJWT), HS256 by default, ``sub`` = member id as a string, ``exp`` required.

The key is ``PINLOG_JWT_SECRET`` and the algorithm ``PINLOG_JWT_ALGORITHM``; only that algorithm
is accepted when verifying (no ``none``, no algorithm confusion).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import jwt
from pydantic import SecretStr

from pinlog.errors import PinlogError
from pinlog.settings import Settings


@dataclass(frozen=True)
class AuthConfig:
    """Member tokens: ``PINLOG_JWT_SECRET`` (the key), ``PINLOG_JWT_ALGORITHM``,
    ``PINLOG_JWT_TTL`` (lifetime); and ``PINLOG_INTERNAL_SECRETS``, which the operator API
    (``/ops/v1``, what the ``pinlog`` command asks a running server) accepts."""

    secret: SecretStr | None
    algorithm: str
    ttl: timedelta
    internal_secrets: tuple[SecretStr, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> AuthConfig:
        return cls(secret=settings.jwt_secret, algorithm=settings.jwt_algorithm,
                   ttl=settings.jwt_ttl, internal_secrets=tuple(settings.internal_secrets))

    def internal_secret_values(self) -> list[str]:
        """The accepted internal secrets (never log them)."""
        return [s.get_secret_value() for s in self.internal_secrets]


class InvalidToken(PinlogError):
    """The token is missing, malformed, expired, signed with another key or names no member id.
    The message is fixed and never contains the token."""


def _key(config: AuthConfig) -> str:
    if config.secret is None:
        raise InvalidToken("no JWT secret configured")
    return config.secret.get_secret_value()


def issue_token(config: AuthConfig, member_id: int) -> str:
    """A signed token for ``member_id`` valid for ``config.ttl``.

    Raises:
        InvalidToken: no JWT secret configured.
    """
    now = datetime.now(UTC)
    claims = {"sub": str(int(member_id)), "iat": now, "exp": now + config.ttl}
    return jwt.encode(claims, _key(config), algorithm=config.algorithm)


def verify_token(config: AuthConfig, token: str) -> int:
    """The member id in a valid token.

    Raises:
        InvalidToken: bad signature, wrong algorithm, expired, no ``exp``, or ``sub`` is not a
            positive integer.
    """
    try:
        claims = jwt.decode(token, _key(config), algorithms=[config.algorithm],
                            options={"require": ["exp", "sub"]})
    except jwt.PyJWTError:
        raise InvalidToken("invalid token") from None
    sub = claims.get("sub")
    # ASCII digits only ("¹".isdigit() is True) and at most 19 of them (bigint), before int().
    if (not isinstance(sub, str) or not sub.isascii() or not sub.isdigit() or len(sub) > 19
            or not 0 < int(sub) < 2**63):
        raise InvalidToken("invalid token")
    return int(sub)
