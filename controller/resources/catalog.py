"""Every resource kind the controller serves, in one list."""

from __future__ import annotations

from collections.abc import Iterable

from controller.model.registry import Registry
from controller.model.spec import Resource
from controller.resources.api_session_certificates import API_SESSION_CERTIFICATES
from controller.resources.associations import ASSOCIATIONS
from controller.resources.authenticators import AUTHENTICATORS
from controller.resources.cas import CAS
from controller.resources.configs import CONFIG_TYPES, CONFIGS
from controller.resources.edge_sessions import SESSIONS
from controller.resources.enrollments import ENROLLMENTS
from controller.resources.identities import IDENTITIES, IDENTITY_TYPES
from controller.resources.jwt_signers import EXTERNAL_JWT_SIGNERS
from controller.resources.posture_checks import POSTURE_CHECK_TYPES, POSTURE_CHECKS
from controller.resources.router_policies import EDGE_ROUTER_POLICIES, SERVICE_EDGE_ROUTER_POLICIES
from controller.resources.routers import EDGE_ROUTERS, ROUTERS
from controller.resources.service_configs import SERVICE_CONFIGS
from controller.resources.services import SERVICE_POLICIES, SERVICES
from controller.resources.sessions import API_SESSIONS, AUTH_POLICIES
from controller.resources.terminators import TERMINATORS
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
    API_SESSION_CERTIFICATES,
    AUTHENTICATORS,
    AUTH_POLICIES,
    SESSIONS,
    EDGE_ROUTERS,
    ROUTERS,
    EDGE_ROUTER_POLICIES,
    SERVICE_EDGE_ROUTER_POLICIES,
    TERMINATORS,
    CONFIG_TYPES,
    CONFIGS,
    EXTERNAL_JWT_SIGNERS,
    CAS,
    ENROLLMENTS,
    SERVICE_CONFIGS,
)

# Kinds kept in storage that are not resources of their own: MFA enrolments and the posture engine's per-identity
# state (keyed by identity id), and the throttles and failure counts the nodes of a cluster share.
INTERNAL: tuple[KindLayout, ...] = (KindLayout("mfa"), KindLayout("posture-state"), KindLayout("posture-pending"),
                                    KindLayout("guess-counters"))


def build_registry(internal: Iterable[KindLayout] = ()) -> Registry:
    """The registry of every resource kind and of the internal kinds above, with ``internal`` besides (the kinds
    of parts that keep their own rows, such as the event log)."""
    return Registry(RESOURCES, (*INTERNAL, *internal), ASSOCIATIONS)
