"""/v1/search input errors name the field (a field called `query` is not the query string)."""

from pinlog.core.api.auth import issue_token
from pinlog.core.services import CoreService
from tests.support.app import running_app
from tests.conftest import config_of


async def test_blank_or_too_long_query_names_the_field(settings, db_url, engine):
    member = await CoreService(engine, None, config_of(settings).core.service).create_member("q-errors")
    headers = {"Authorization": f"Bearer {issue_token(config_of(settings).core.auth, member)}"}
    async with running_app(settings, db_url, components=("core",)) as running:
        for body, problem in (({"query": ""}, "must not be empty"),
                              ({"query": "x" * 501}, "must be at most 500 characters"),
                              ({"query": "   "}, "must not be empty or whitespace")):
            response = await running.http.post("/v1/search", json=body, headers=headers)
            assert response.status_code == 422
            assert response.json()["problems"] == [{"field": "query", "problem": problem}]
