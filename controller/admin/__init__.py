"""The operators' admin CLI (``tollgate login``, ``list``, ``create``...): a Management API client on click and httpx.

``controller.admin.verbs.cli`` is the click group of every admin verb; ``controller/cli.py`` adds ``serve`` to it.
Its kinds, flags and the model file of ``apply``/``export`` derive from the resource specs (``specs`` holds the
registry; ``kinds`` and ``model_format`` read it with ``controller.model.request_fields``); ``cli_table`` holds only
presentation (columns, option names, help texts).

It imports the resource specs and what they are made of (``controller.resources``, ``controller.model``), never the
server's runtime or the web layer: it talks to a controller over HTTP. Reading a controller's model and carrying
out an apply plan take narrow interfaces (``export.ModelRows``, ``apply.ModelWrites`` and the sans-IO
``apply.requests``), which the web console satisfies in process with the controller's own parts.
"""

from controller.admin.admin_client import AdminClient, AdminError, ConnectionProblem

__all__ = ["AdminClient", "AdminError", "ConnectionProblem"]
