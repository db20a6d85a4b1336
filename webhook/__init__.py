"""The I/O shell of catalog-warden: admission and conversion server, TLS, cluster state, CLI.

Nothing here decides anything about a resource: decisions live in ``policies``. This package
parses the wire, consults the rule tables, frames answers, serves TLS, and keeps state.
"""
