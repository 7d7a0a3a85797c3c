"""Who a caller is: API sessions, the ways to log in, MFA, lockout, disabling, and the controller's PKI.

The rest of the controller and the web layer import what they need from here; the modules behind it are:

* ``api_sessions``: live API sessions by token, sliding expiry, logout;
* ``password_hashing``: scrypt hashes of updb passwords;
* ``password_login``: login by username and password under the identity's auth policy;
* ``lockout``: consecutive wrong passwords and when they lock an identity out;
* ``disable``: an identity's disabled window, set by an admin or a lockout;
* ``mfa``: TOTP enrolment, verification and recovery codes;
* ``pki`` and ``server_names``: the controller's CA and TLS server certificate.
"""

from controller.authentication.api_sessions import KIND as API_SESSIONS
from controller.authentication.api_sessions import ApiSessions, ApiSessionsStatistics, LiveSession
from controller.authentication.disable import DISABLE_SCHEMA, disable_identity, enable_identity
from controller.authentication.mfa import MFA_AUTH_QUERY, MFA_CODE_SCHEMA, MfaService
from controller.authentication.password_hashing import hash_password
from controller.authentication.password_login import login_password
from controller.authentication.pki import Pki, PkiError, cacerts_pkcs7_b64, ensure_pki

__all__ = [
    "API_SESSIONS",
    "DISABLE_SCHEMA",
    "MFA_AUTH_QUERY",
    "MFA_CODE_SCHEMA",
    "ApiSessions",
    "ApiSessionsStatistics",
    "LiveSession",
    "MfaService",
    "Pki",
    "PkiError",
    "cacerts_pkcs7_b64",
    "disable_identity",
    "enable_identity",
    "ensure_pki",
    "hash_password",
    "login_password",
]
