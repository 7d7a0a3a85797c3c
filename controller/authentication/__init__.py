"""Who a caller is: API sessions, the ways to log in and enrol, MFA, lockout and disabling.

The rest of the controller and the web layer import what they need from here; the modules behind it are:

* ``api_sessions``, ``live_session`` and ``session_writes``: live API sessions by token, sliding expiry (shared by
  the nodes of a cluster), logout, and the writes they make;
* ``session_start``: the common end of every login (auth policy, MFA requirement, the session row);
* ``login``: the one entry of every login method;
* ``password_hashing``, ``hashing`` and ``password_login``: scrypt hashes of updb passwords, the bounded work of
  making and checking them, and login by password;
* ``certificate_login``: login by client certificate (the certificates themselves: ``controller.certificates``);
* ``ext_jwt_login``: login by an external identity provider's JWT, and that JWT as a second factor;
* ``enrollment``, ``enrollment_claims``, ``router_enrollment``, ``ca_enrollment`` and ``enrollment_admin``:
  enrolment by identities, routers and third-party CAs' certificates, and the enrollments admins make;
* ``own_authenticators`` and ``session_certificates``: an identity's own password change and certificate
  extension, and the certificates of an API session;
* ``lockout``, ``throttle``, ``shared_throttles`` and ``disable``: consecutive wrong passwords, throttles on
  guessing passwords and MFA codes (in memory, or in rows the nodes of a cluster share), and an identity's disabled
  window;
* ``mfa``: TOTP enrolment, verification and recovery codes;
* ``enrollment_jwt``: the JWTs clients enrol with;
* ``jwks`` and ``external_jwt``: verifying JWTs of external identity providers;
* ``parts``: the narrow interfaces (Protocols) each of these takes instead of the whole controller.

It imports posture, resources, data, access, certificates and model; the runtime builds on it. What it needs of the
posture engine and the metrics it names as behaviour (``parts.PostureEvents``, ``parts.LoginFailures``).
"""

from controller.authentication.api_sessions import KIND as API_SESSIONS
from controller.authentication.api_sessions import ApiSessions, ApiSessionsStatistics, LiveSession
from controller.authentication.disable import DISABLE_SCHEMA, disable_identity, enable_identity
from controller.authentication.enrollment_jwt import EnrollmentJwts, load_token_key
from controller.authentication.hashing import PasswordHashing
from controller.authentication.jwks import JwksCache
from controller.authentication.login import Credentials, login
from controller.authentication.mfa import MFA_AUTH_QUERY, MFA_CODE_SCHEMA, MfaService
from controller.authentication.password_hashing import hash_password
from controller.authentication.password_login import login_password
from controller.authentication.throttle import GuessThrottles

__all__ = [
    "API_SESSIONS",
    "DISABLE_SCHEMA",
    "MFA_AUTH_QUERY",
    "MFA_CODE_SCHEMA",
    "ApiSessions",
    "ApiSessionsStatistics",
    "Credentials",
    "EnrollmentJwts",
    "GuessThrottles",
    "JwksCache",
    "LiveSession",
    "MfaService",
    "PasswordHashing",
    "disable_identity",
    "enable_identity",
    "hash_password",
    "load_token_key",
    "login",
    "login_password",
]
