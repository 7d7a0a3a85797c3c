"""The event catalog, the README and the OpenAPI document describe the same event types."""

from __future__ import annotations

from pathlib import Path

from controller.insight.catalog import EVENT_TYPES
from controller.model.events import NAMESPACES
from tests.support import Api

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_event_type_is_in_the_readme_and_a_known_namespace() -> None:
    text = README.read_text()
    for name in EVENT_TYPES:
        namespace, _, event_type = name.rpartition(".")
        assert namespace in NAMESPACES, name
        assert f"`{name}`" in text or f"`{namespace}.{event_type}` /" in text or f"/ `.{event_type}`" in text \
            or f"`.{event_type}`" in text, name


async def test_the_openapi_document_lists_every_event_type(admin: Api) -> None:
    document = (await admin.get("/specs/edge-management/spec", raw=None)).body
    listed = document["paths"]["/events"]["get"]["responses"]["200"]["schema"]["properties"]["data"]["items"]
    assert set(listed["x-event-types"]) == set(EVENT_TYPES)
    assert "/identities/{id}/access/{serviceId}" in document["paths"]
    assert document["paths"]["/events/stream"]["get"]["produces"][0] == "text/event-stream"
