"""The sidecar: availability, referenced-set publication and reclamation loops (DESIGN.md section 6).

Plumbing only: every decision is a pure function in ``policies/`` (``artifacts``, ``availability``,
``referenced_set``, ``reclaim``); these modules read the informer cache, talk to registries and
write to the API. ``runner.Sidecar`` wires them under leader election; ``events`` is the HTTP
endpoint that turns registry notifications into early re-checks (never into deletions).
"""
