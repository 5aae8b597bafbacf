"""Request dependencies: the current member (from the JWT) and the core service."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pinlog.core.api.auth import InvalidToken, verify_token
from pinlog.core.api.errors import Unauthorized
from pinlog.core.services import CoreService

_bearer = HTTPBearer(auto_error=False, description="Member token: `pinlog token --member ID`")


def get_service(request: Request) -> CoreService:
    """The :class:`CoreService` of the running core runtime (``app.state.core``)."""
    return request.app.state.core.service


async def current_member(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> int:
    """The member id of a valid ``Authorization: Bearer <JWT>`` whose member is active.

    Raises:
        Unauthorized: no/invalid/expired token, or the member has withdrawn (→ 401).
    """
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized()
    try:
        member_id = verify_token(request.app.state.core.config.auth, credentials.credentials)
    except InvalidToken:
        raise Unauthorized() from None
    if not await get_service(request).member_is_active(member_id):
        raise Unauthorized()
    return member_id


Member = Annotated[int, Depends(current_member)]
Service = Annotated[CoreService, Depends(get_service)]
