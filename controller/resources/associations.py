"""The association lists ``GET /{kind}/{id}/{path}`` of every kind, computed from role selectors and references."""

from __future__ import annotations

from controller.resources.spec import Association

__all__ = ["ASSOCIATIONS"]

ASSOCIATIONS: dict[str, tuple[Association, ...]] = {}
