"""A kube-apiserver double for tests: the official `kubernetes` client talks to it unchanged.

See `double.ApiServerDouble` for the entry point and docs/testing notes in its module docstring.
"""

from tests.support.apiserver.double import ADMIN_GROUPS, ADMIN_USER, ApiServerDouble
from tests.support.apiserver.pki import KeyPair, TestCA

__all__ = ["ADMIN_GROUPS", "ADMIN_USER", "ApiServerDouble", "KeyPair", "TestCA"]
