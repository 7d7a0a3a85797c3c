"""ZitiQL, the filter language of the Edge Management API's lists: parsed by a real grammar, compiled once into
closures over rows, with the index hints and sort keys a list needs.

This package owns the language alone: it imports nothing of the project, only the standard library and lark. Every
caller imports it from here (``storage.zitiql``), never from its modules.
"""

from storage.zitiql.parser import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_LENGTH,
    FieldType,
    IndexHint,
    Query,
    QueryError,
    SortError,
    SortKey,
    Symbol,
    TextColumn,
    TextSearch,
    compile_filter,
    order_rows,
    parse_sort,
    stored_fields,
)

__all__ = [
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_LENGTH",
    "FieldType",
    "IndexHint",
    "Query",
    "QueryError",
    "SortError",
    "SortKey",
    "Symbol",
    "TextColumn",
    "TextSearch",
    "compile_filter",
    "order_rows",
    "parse_sort",
    "stored_fields",
]
