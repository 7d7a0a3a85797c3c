"""The URL rule class of the application: werkzeug's rule, with its URL builders compiled on first use.

werkzeug compiles two URL-building functions per rule (source generated, then ``compile()``) the moment a rule is
added. With the ~190 rules of both APIs that was about 85 % of building the application (~0.2 s here), paid on
every start of a controller (and by every test that makes one), while this API builds a URL from an endpoint only
rarely, if ever. Matching requests does not use the builders at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quart.routing import QuartRule

__all__ = ["LazyBuilderRule"]

Builder = Callable[..., tuple[str, str]]


class LazyBuilderRule(QuartRule):
    """A :class:`QuartRule` whose builders are compiled by the first ``build`` that needs them; the URLs they build
    are werkzeug's own."""

    def _compile_builder(self, append_unknown: bool = True) -> Builder:
        compiled: Builder | None = None

        def build(rule: QuartRule, *args: Any, **kwargs: Any) -> tuple[str, str]:
            nonlocal compiled
            if compiled is None:
                compiled = QuartRule._compile_builder(rule, append_unknown)
            return compiled(rule, *args, **kwargs)

        return build
