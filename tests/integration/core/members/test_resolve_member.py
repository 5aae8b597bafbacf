"""`--member ID_OR_REF` never guesses between a member id and another member's numeric ref."""

import pytest

from pinlog.core.services import CoreService, InvalidInput, NotFound
from tests.conftest import config_of


async def test_numeric_ref_that_is_also_another_members_id_is_refused_unless_qualified(engine, settings):
    service = CoreService(engine, None, config_of(settings).core.service)
    first = await service.create_member("alice")            # id 1
    second = await service.create_member(str(first))         # external ref "1", id 2
    with pytest.raises(InvalidInput, match="id:1 or ref:1"):
        await service.resolve_member(str(first))
    assert await service.resolve_member(f"id:{first}") == first
    assert await service.resolve_member(f"ref:{first}") == second
    assert await service.resolve_member("alice") == first
    assert await service.resolve_member(str(second)) == second  # id 2, no member with ref "2"


async def test_unknown_member_is_not_found(engine, settings):
    service = CoreService(engine, None, config_of(settings).core.service)
    for value in ("nobody", "id:99", "ref:99", "99", "id:¹"):
        with pytest.raises(NotFound):
            await service.resolve_member(value)
