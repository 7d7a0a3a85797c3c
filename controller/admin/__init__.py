"""The operators' admin CLI (``tollgate login``, ``list``, ``create``...): a Management API client on click and httpx.

``controller.admin.verbs.cli`` is the click group ``controller.cli.main`` runs: ``serve`` and every admin verb.
"""

from controller.admin.admin_client import AdminClient, AdminError, ConnectionProblem

__all__ = ["AdminClient", "AdminError", "ConnectionProblem"]
