"""A kube-apiserver double for tests: the official `kubernetes` client talks to it unchanged.

Entry point: `ApiServerDouble(manifests_dir, webhook_base_url=..., ca_bundle=..., tls=False)`, used as a
context manager (or `start()`/`stop()`); `.url`, `.admin`, `.api_client(user, groups)` (a bearer token
per client, mapped to that user: every request and AdmissionReview carries it). pytest fixtures for any
test directory are in `fixtures.py`; a scriptable TLS webhook server is in `scripted_webhook.py`.

Modules, each with one job:
- `resources`   built-in kinds (Namespace, Secret, ConfigMap, Event, Lease) and CRDs from manifests
- `store`       etcd: storage-version objects, global resourceVersion, CAS writes, the event window
- `operations`  the verbs in kube-apiserver's order (NamespaceLifecycle, mutating admission, strategy,
                schema, validating admission, CAS write), watch streaming, delete and finalizers
- `schema`      structural pruning, defaults, OpenAPI validation (not CEL)
- `selectors`   label selectors (query syntax and LabelSelector) and metadata field selectors
- `webhooks`    webhook configurations from manifests and request matching
- `admission`   AdmissionReview calls over TLS, response verification, failurePolicy, patches
- `conversion`  CRD conversion (None, or ConversionReview to the webhook)
- `controllers` garbage collector and namespace controller, under their real identities
- `server`      HTTP routing, authentication, discovery, chunked watch responses
- `errors`      Kubernetes `Status` errors with apimachinery's messages

Known differences from kube-apiserver (none matters to the project today):
- no authorization (RBAC), no managedFields, no server-side apply, no CEL (`x-kubernetes-validations`,
  `matchConditions`), no `reinvocationPolicy: IfNeeded`;
- strategic merge patch on built-ins is applied as a JSON merge patch (their lists are not keyed);
- list `resourceVersion`/`resourceVersionMatch` always serve the current state (never older, never 504);
- validating webhooks are called one after another (kube calls them in parallel; results are the same).
"""

from tests.support.apiserver.double import ADMIN_GROUPS, ADMIN_USER, ApiServerDouble
from tests.support.apiserver.pki import KeyPair, TestCA

__all__ = ["ADMIN_GROUPS", "ADMIN_USER", "ApiServerDouble", "KeyPair", "TestCA"]
