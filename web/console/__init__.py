"""The web console: server-rendered pages for operators under ``/console/`` on the management listener.

``console_blueprint(controller)`` is its quart Blueprint (``web/app.py`` mounts it). Pages are Jinja2 templates
(``templates/console/``) with htmx (``static/htmx.min.js``, vendored: ``static/htmx.manifest.json`` records its
version, source, SHA-256 and licence) for partial updates; every flow works without JavaScript where a form can do
the job. The console calls the controller in process, through the parts the API's handlers use (the domain facade,
the posture engine, the API sessions, MFA, the admin CLI's model-file planner), never over HTTP, and derives its
forms, columns and filters from the resource specs.

* ``blueprint``: the routes, headers and error pages; ``guard`` and ``sessions``: login, console sessions, CSRF and
  origin checks;
* ``auth_pages``, ``overview_page``, ``kind_pages``, ``edit_pages``, ``identity_pages``, ``model_pages``: the pages;
* ``widgets``, ``form_values``, ``columns``, ``list_query``: forms, lists and detail pages derived from the specs;
* ``reading`` and ``rendering``: what pages read beyond one list or row, and how a page is rendered.

It is part of the web layer: it imports the controller's public parts, Quart, Jinja2 and segno; nothing imports it
but ``web.app``.
"""

from web.console.blueprint import console_blueprint

__all__ = ["console_blueprint"]
