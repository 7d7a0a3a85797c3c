"""The operators' admin CLI (``tollgate login``, ``list``, ``create``...): a Management API client on click and httpx.

``controller.admin.verbs.cli`` is the click group of every admin verb; ``controller/cli.py`` adds ``serve`` to it.
Its kinds, flags and the model file of ``apply``/``export`` derive from the resource specs (``specs``, ``kinds``,
``model_format``); ``cli_table`` holds only presentation (columns, option names, help texts).

It imports the resource specs and what they are made of (``controller.resources``, ``controller.model``), never the
server's runtime or the web layer: it talks to a controller over HTTP.
"""

from controller.admin.admin_client import AdminClient, AdminError, ConnectionProblem

__all__ = ["AdminClient", "AdminError", "ConnectionProblem"]
