"""The LMDB store: rows of each kind keyed by id and encoded with msgpack (``rows``, ``keys``), the layouts the
controller declares for its kinds (``layout``) and the index DBs derived from them (``indexes``), read snapshots
and the write transaction (``store``), the synchronous half of group commit (``batch``), the memo of answers
shared across snapshots (``shared_memo``), one process per environment (``ownership``), the audit of indexes
against rows (``index_audit``), and the filter language (``zitiql/``).

It imports lmdb, msgspec and lark, never Trio, Quart or the controller: the controller builds on it.
"""
