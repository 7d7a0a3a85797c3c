"""What the logins, enrolments and certificate operations need from the running controller, as narrow interfaces.

Each function of this package takes the one Protocol below that names the parts it uses, never the whole
controller: the composition root's :class:`~controller.runtime.composition.Controller` satisfies every one of them
structurally, a test may hand in anything smaller that does, and mypy checks each use. Parts whose behaviour a
login needs from a layer above (the posture engine, the metrics) appear as behaviour-only Protocols
(:class:`PostureEvents`, :class:`LoginFailures`), so this package never imports that layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from controller.authentication.api_sessions import ApiSessions
    from controller.authentication.enrollment_jwt import EnrollmentJwts
    from controller.authentication.hashing import PasswordHashing
    from controller.authentication.jwks import JwksCache
    from controller.authentication.throttle import Throttles
    from controller.certificates import Issuer, Pki
    from controller.clock import Clock
    from controller.data.domain import Domain

__all__ = ["IssuingParts", "LoginFailures", "LoginParts", "MfaEnrolments", "PostureEvents", "SessionParts",
           "UncountedLoginFailures"]


class PostureEvents(Protocol):
    """What logins and MFA tell the posture engine (through :class:`controller.posture.service.PostureService`)."""

    def api_session_started(self, identity_id: str, api_session_id: str) -> None:
        """An API session of the identity started."""

    async def mfa_passed(self, identity_id: str, api_session_id: str) -> None:
        """The API session proved MFA; returns once the identity's actor has taken it into account."""

    async def mfa_removed(self, identity_id: str) -> None:
        """The identity's MFA enrolment is gone; returns once the sessions that depended on it are revoked."""


class LoginFailures(Protocol):
    """Where refused logins are counted (the controller's metrics, when it has any)."""

    def login_failed(self, method: str, code: str) -> None:
        """A login by ``method`` (``password``, ``cert``, ``ext-jwt``, ``mfa``) was refused with ``code``."""


class UncountedLoginFailures:
    """The :class:`LoginFailures` of a controller without metrics: nothing is counted."""

    def login_failed(self, method: str, code: str) -> None:
        return None


class MfaEnrolments(Protocol):
    """Whether an identity's MFA enrolment is verified (:class:`controller.authentication.mfa.MfaService`)."""

    def is_enrolled(self, identity_id: str) -> bool:
        """True once the identity's enrolment is verified."""


class SessionParts(Protocol):
    """What starting an API session uses (:func:`controller.authentication.session_start.start_session`)."""

    @property
    def domain(self) -> Domain: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def sessions(self) -> ApiSessions: ...

    @property
    def mfa(self) -> MfaEnrolments: ...

    @property
    def posture(self) -> PostureEvents: ...


class LoginParts(SessionParts, Protocol):
    """What every primary login method uses (:func:`controller.authentication.login.login`)."""

    @property
    def throttles(self) -> Throttles: ...

    @property
    def hashing(self) -> PasswordHashing: ...

    @property
    def pki(self) -> Pki: ...

    @property
    def jwks(self) -> JwksCache: ...

    @property
    def login_failures(self) -> LoginFailures: ...


class IssuingParts(Protocol):
    """What enrolment and the certificate operations use: the store, the CA's issuer, the enrolment tokens and
    password hashing."""

    @property
    def domain(self) -> Domain: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def issuer(self) -> Issuer: ...

    @property
    def pki(self) -> Pki: ...

    @property
    def jwts(self) -> EnrollmentJwts: ...

    @property
    def hashing(self) -> PasswordHashing: ...
