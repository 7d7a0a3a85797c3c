"""The registry of every kind the controller serves, as the admin CLI reads it (the CLI runs apart from any
controller, so it builds its own from the resource specs)."""

from __future__ import annotations

from controller.model.registry import Registry
from controller.resources.catalog import build_registry

__all__ = ["REGISTRY"]

REGISTRY: Registry = build_registry()
"""Every kind the controller serves."""
