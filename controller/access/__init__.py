"""Who may use what: role selectors (``#attribute``, ``@id``, ``#all``; ``roles``), the links between policies and
the entities they select (``policy_links``), and what service policies grant an identity, with the posture checks
they require and the edge routers it shares with a service (``grants``).

Pure functions of a read snapshot: it imports ``controller.model``, ``controller.errors`` and ``storage`` only.
"""
