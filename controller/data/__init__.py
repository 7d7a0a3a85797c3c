"""The data layer: the domain facade request handlers and services read and write through (``domain``), the single
write path every row goes through (``write_path``), group commit on a pinned thread (``group_commit``,
``pinned_thread``), list queries (``listing``) and rows turned into response bodies (``present``).

It imports ``controller.model``, ``controller.access`` (role selectors), the base modules and ``storage``; it knows no
resource kind by name.
"""
