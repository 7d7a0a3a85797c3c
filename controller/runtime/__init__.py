"""The running controller: its settings, the composition root that builds every part once (``composition``), the
task tree that starts their services in one order and serves the APIs (``task_tree``), the first start's bootstrap,
structured logs, metrics, the garbage-collection policy (``memory``), the controllers of the network
(``controllers``) and the ``tollgate serve`` command (``serve_command``).

The top of the server: it may import every controller package below it, and the task tree alone imports the web
layer (which it serves).
"""
