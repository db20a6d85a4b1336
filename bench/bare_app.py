"""The floor for admission throughput: a bare ASGI app answering a fixed AdmissionReview.

Served by the same uvicorn stack and TLS as the real server (bench/bench_admission.py).
"""

from __future__ import annotations

import json

FIXED = json.dumps(
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "fixed", "allowed": True}}
).encode()


async def app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": FIXED})
