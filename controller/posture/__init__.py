"""Posture: what endpoints report, the rules checks apply to it, and the engine that keeps every identity's
sessions in line with them.

* :mod:`controller.check_types.os_versions`: semver range statements of OS checks and reported OS versions;
* :mod:`controller.check_types.bodies`: aliases, validation and the stored form of posture-check bodies;
* :mod:`controller.posture.records`: posture records and MFA state, and the MFA time rules;
* :mod:`controller.posture.rules`: each check type's rule, as a verdict and as a report;
* :mod:`controller.access.grants` and :mod:`controller.posture.plan`: what policies give an identity, and the
  plans an actor evaluates posture against;
* :mod:`controller.posture.state`, :mod:`controller.posture.messages`, :mod:`controller.posture.machine` and
  :mod:`controller.posture.engine`: the identity actors (state, messages, pure transitions, shell);
* :mod:`controller.posture.queries`: what the Client API shows an endpoint about a service's posture checks.
"""
