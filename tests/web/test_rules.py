"""The application's URL rules: builders compiled lazily still build werkzeug's URLs, and matching is unchanged."""

from __future__ import annotations

from controller.runtime.composition import Controller
from tests.conftest import Api
from web.app import create_app
from web.url_rules import LazyBuilderRule


async def test_every_rule_is_lazy_and_builds_its_own_path(controller: Controller) -> None:
    app = create_app(controller)
    rules = [rule for rule in app.url_map.iter_rules() if rule.endpoint != "static"]  # Quart's own, made first
    assert len(rules) > 100 and all(isinstance(rule, LazyBuilderRule) for rule in rules)
    with_id = [r for r in rules if r.arguments == {"id"}]
    assert with_id
    for rule in with_id:
        built = rule.build({"id": "abc-1"})
        assert built is not None and built[1] == rule.rule.replace("<id>", "abc-1")
    # Unknown values become a query string, as werkzeug's eager builders do; the map's own build goes through them.
    first = with_id[0]
    assert first.build({"id": "x", "extra": "1 2"}) == ("", first.rule.replace("<id>", "x") + "?extra=1+2")
    adapter = app.url_map.bind("localhost")
    assert adapter.build(first.endpoint, {"id": "y"}, method=sorted(first.methods or ())[0]) == first.rule.replace(
        "<id>", "y")

async def test_requests_still_match_their_routes(admin: Api) -> None:
    reply = await admin.get("/identities", query={"limit": 1})
    assert reply.status == 200
    assert (await admin.get("/no-such-collection")).status == 404
