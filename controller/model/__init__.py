"""The resource spec machinery: a kind declared as data (:class:`Resource`, :class:`Field`, variants, hooks), the
field shorthands, the contexts hooks and queries see, the registry of every kind and what derives from them all, and
request bodies validated against schemas derived from the specs, and what a request may carry of each field
(``request_fields``, which the admin CLI and the web console derive their flags and forms from).

It imports ``controller.errors`` and ``storage`` only: every other part of the controller builds on it.
"""
