"""The depth bound of :mod:`policies.nesting`, checked at C speed on the request path.

``policies.nesting`` defines the bound and names the field; its walk is plain Python and costs
about 0.25 s for a 3 MiB object made only of tiny containers, most of the time such a request
takes. orjson's encoder refuses any document nested past a fixed limit (254 levels in orjson 3),
so encoding the object wrapped in ``limit - MAX_DEPTH`` arrays succeeds exactly when the object
is within the bound: about 10 ms for the same object. The encoder's limit is measured at import
rather than assumed, and anything the fast path does not prove (too deep, or not encodable for
another reason) is decided by the exact walk, so the answer is always the one
``policies.nesting.depth_problem`` gives.
"""

from __future__ import annotations

from typing import Any

import orjson

from policies import nesting


def _encodes(levels: int) -> bool:
    doc: Any = []
    for _ in range(levels - 1):
        doc = [doc]
    try:
        orjson.dumps(doc)
    except orjson.JSONEncodeError:
        return False
    return True


def _encoder_limit(high: int = 4096) -> int:
    """The deepest document orjson encodes (0 if not even one level, ``high`` if at least that)."""
    low = 0
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if _encodes(mid) else (low, mid - 1)
    return low


ENCODER_LIMIT = _encoder_limit()


def depth_problem(obj: Any, limit: int = nesting.MAX_DEPTH) -> str | None:
    """:func:`policies.nesting.depth_problem`, answered by the encoder when it can prove the bound."""
    pad = ENCODER_LIMIT - limit
    if pad >= 0:
        wrapped = obj
        for _ in range(pad):
            wrapped = [wrapped]
        try:
            orjson.dumps(wrapped)
        except orjson.JSONEncodeError:
            pass
        else:
            return None
    return nesting.depth_problem(obj, limit)
