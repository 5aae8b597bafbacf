"""Member tokens: JWT (PyJWT), HS256 by default, ``sub`` = member id as a string, ``exp`` required.

The key is ``PINLOG_JWT_SECRET`` and the algorithm ``PINLOG_JWT_ALGORITHM``; only that algorithm
is accepted when verifying (no ``none``, no algorithm confusion).
"""

from __future__ import annotations

from datetime import UTC, datetime

import jwt

from pinlog.errors import PinlogError
from pinlog.settings import Settings


class InvalidToken(PinlogError):
    """The token is missing, malformed, expired, signed with another key or names no member id.
    The message is fixed and never contains the token."""


def _key(settings: Settings) -> str:
    if settings.jwt_secret is None:
        raise InvalidToken("no JWT secret configured")
    return settings.jwt_secret.get_secret_value()


def issue_token(settings: Settings, member_id: int) -> str:
    """A signed token for ``member_id`` valid for ``settings.jwt_ttl``.

    Raises:
        InvalidToken: no JWT secret configured.
    """
    now = datetime.now(UTC)
    claims = {"sub": str(int(member_id)), "iat": now, "exp": now + settings.jwt_ttl}
    return jwt.encode(claims, _key(settings), algorithm=settings.jwt_algorithm)


def verify_token(settings: Settings, token: str) -> int:
    """The member id in a valid token.

    Raises:
        InvalidToken: bad signature, wrong algorithm, expired, no ``exp``, or ``sub`` is not a
            positive integer.
    """
    try:
        claims = jwt.decode(token, _key(settings), algorithms=[settings.jwt_algorithm],
                            options={"require": ["exp", "sub"]})
    except jwt.PyJWTError:
        raise InvalidToken("invalid token") from None
    sub = claims.get("sub")
    # ASCII digits only ("¹".isdigit() is True) and at most 19 of them (bigint), before int().
    if (not isinstance(sub, str) or not sub.isascii() or not sub.isdigit() or len(sub) > 19
            or not 0 < int(sub) < 2**63):
        raise InvalidToken("invalid token")
    return int(sub)
