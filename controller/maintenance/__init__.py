"""Database upkeep: snapshots of the store and data-integrity runs in the background (``operations``), and the
integrity check with its repairs as plain functions over a transaction (``integrity``).

It imports the layers below it (authentication and posture for the internal kinds they keep, data, model); nothing
above it imports it but the runtime and the web layer.
"""
