"""The web layer: HTTP only. A request is decoded, handed to the controller's parts, and its answer wrapped in the
envelope; nothing here decides a domain rule.

* ``app``: ``create_app(controller)``, the quart-trio application serving both APIs;
* ``route_table`` and ``guards``: what each operation is and who may call it, enforced from the declaration;
* ``routes/``: the route groups beyond each kind's standard routes;
* ``request``, ``envelope``, ``error_handlers``: bodies and list parameters, the JSON envelopes, and the request
  boundary where every exception becomes an error envelope;
* ``openapi``: our OpenAPI documents, generated from the route table and the resource specs;
* ``server``, ``client_certs``, ``legacy_paths``, ``url_rules``: hypercorn's Trio worker with client certificates,
  the paths old SDKs use, and URL rules built lazily;
* ``metrics_app``: the separate metrics listener;
* ``console/``: the web console (``/console/``), pages for operators on the management listener.

It imports the controller's public parts, Quart and hypercorn; nothing below it imports it, but the task tree
(``controller/runtime/task_tree.py``) that serves it.
"""
