"""Pure admission, conversion and retention decisions for catalog-warden.

Everything in this package is a function of its inputs: Kubernetes objects (plain JSON
dicts), a read-only :class:`~policies.view.View` of other objects, the configuration and
the current time. Nothing here performs I/O, reads a clock or keeps global mutable state,
so the admission server and the sidecar loops can call the same rule and get the same answer.

``policies`` never imports ``webhook``.
"""
