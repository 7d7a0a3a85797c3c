"""Every resource kind the Management API serves, one module per kind (or per pair of close kinds): each declares
its :class:`controller.model.Resource` and the hooks of its real domain rules; ``catalog`` lists them all and
builds the registry, ``associations`` declares the association lists of every kind.

It imports ``controller.model``, ``controller.data``, ``controller.access``, ``controller.certificates``,
``controller.check_types`` and the base modules; nothing in it imports authentication, posture or the runtime.
"""
