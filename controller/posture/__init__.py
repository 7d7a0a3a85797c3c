"""Posture: what endpoints report, the rules checks apply to it, and the engine that keeps every identity's
sessions in line with them.

* ``records``: posture records and MFA state, and the MFA time rules;
* ``rules``: each check type's rule, as a verdict and as a report (the check bodies and OS version ranges they read
  are ``controller.check_types``);
* ``plan``: the plans an actor evaluates posture against, built from what policies grant
  (``controller.access.grants``);
* ``state``, ``messages``, ``machine``, ``engine`` and ``persistence``: the identity actors (stored state, frozen
  messages, the pure transition, the shell on ``actors``, and the writes queued behind it);
* ``queries`` and ``client_services``: what the Client API shows an endpoint about services and their posture
  checks.

It imports the layers below it (resources, data, access, check_types, model) and ``actors``; authentication and
the runtime build on it, and reach the engine only through :class:`controller.posture.service.PostureService`
(``controller/authentication/parts.py`` names the part logins use).
"""
