"""The route groups of both APIs beyond the standard routes of every kind, one module per group; each has
``register(...)``, which adds its operations to the route table (``web.route_table``) with one ``add``.

Route modules import ``web``'s helpers (envelopes, request decoding, guards, the route table) and the controller's
public parts; they never import ``web.app``, which imports them.
"""
