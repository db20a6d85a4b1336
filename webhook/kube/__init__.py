"""The cluster connection: API client and resource table, informer cache, write primitives, leader election.

Everything here speaks raw JSON through the official ``kubernetes`` client's transport (auth,
TLS, kubeconfig and in-cluster config come from it); objects stay decoded dicts, as the policies
expect them, instead of being turned into generated model classes and back.
"""
