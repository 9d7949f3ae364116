"""kio's schema lookups, cached.

kio resolves a dotted module path on every `load_request_schema` / `load_response_schema`
call (~3 µs), and the broker looks up a schema for every request it reads and every response
it writes: the classes never change, so each is resolved once.
"""

from __future__ import annotations

from functools import cache

from kio.index import load_request_schema as _load_request_schema
from kio.index import load_response_schema as _load_response_schema

load_request_schema = cache(_load_request_schema)
load_response_schema = cache(_load_response_schema)

__all__ = ["load_request_schema", "load_response_schema"]
