"""Tollgate's performance record: ``python -m bench <scenario> [--quick] [--json FILE]``.

Every figure is a ratio against a baseline measured in the same run, interleaved with it, as the median of at least
three rounds: the machines are shared and their speed drifts within minutes, so absolute numbers from different
runs cannot be compared, but a ratio measured side by side can. ``--quick`` is a smoke run of a few seconds that
``make test`` executes so that no scenario rots; its figures are not evidence of anything.
"""
