"""/v1/search input errors name the field (a field called `query` is not the query string)."""

import httpx

from pinlog.app import create_app
from pinlog.core.api.auth import issue_token
from pinlog.core.services import CoreService


async def test_blank_or_too_long_query_names_the_field(settings, db_url, engine):
    app = create_app(settings, components=("core",), database_url=db_url)
    member = await CoreService(engine, None, settings).create_member("q-errors")
    headers = {"Authorization": f"Bearer {issue_token(settings, member)}"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for body, problem in (({"query": ""}, "must not be empty"),
                                  ({"query": "x" * 501}, "must be at most 500 characters"),
                                  ({"query": "   "}, "must not be empty or whitespace")):
                response = await client.post("/v1/search", json=body, headers=headers)
                assert response.status_code == 422
                assert response.json()["problems"] == [{"field": "query", "problem": problem}]
