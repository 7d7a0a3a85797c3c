"""Every resource kind the controller serves, in one list."""

from __future__ import annotations

from controller.registry import Registry
from controller.resources.associations import ASSOCIATIONS
from controller.resources.identities import IDENTITIES, IDENTITY_TYPES
from controller.resources.posture_checks import POSTURE_CHECK_TYPES, POSTURE_CHECKS
from controller.resources.services import SERVICE_POLICIES, SERVICES
from controller.resources.sessions import API_SESSIONS, AUTH_POLICIES, AUTHENTICATORS
from controller.resources.spec import Resource
from storage.store import KindLayout

__all__ = ["RESOURCES", "build_registry"]

RESOURCES: tuple[Resource, ...] = (
    IDENTITIES,
    IDENTITY_TYPES,
    SERVICES,
    SERVICE_POLICIES,
    POSTURE_CHECKS,
    POSTURE_CHECK_TYPES,
    API_SESSIONS,
    AUTHENTICATORS,
    AUTH_POLICIES,
)

# Kinds kept in storage that are not resources of their own: MFA enrolments (keyed by identity id).
INTERNAL: tuple[KindLayout, ...] = (KindLayout("mfa"),)


def build_registry() -> Registry:
    return Registry(RESOURCES, INTERNAL, ASSOCIATIONS)
