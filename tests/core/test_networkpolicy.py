"""The NetworkPolicy admits each port from its one kind of client and nothing from everywhere."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "manifests" / "deploy"
PLACEHOLDER = "192.0.2.0/24"

EXPECTED_PEERS = {
    9443: [{"ipBlock": {"cidr": PLACEHOLDER}}],
    8080: [{"namespaceSelector": {"matchLabels": {"catalog-warden.io/monitoring": "true"}}}],
    8081: [
        {"namespaceSelector": {"matchLabels": {"catalog-warden.io/registry": "true"}}},
        {"namespaceSelector": {"matchLabels": {"catalog-warden.io/monitoring": "true"}}},
    ],
}


def _policy() -> dict:
    (policy,) = yaml.safe_load_all((DEPLOY / "networkpolicy.yaml").read_text())
    return policy


def _container_ports() -> set[int]:
    docs = [d for path in DEPLOY.glob("*.yaml") for d in yaml.safe_load_all(path.read_text()) if d]
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]
    return {p["containerPort"] for pod in pods for c in pod["containers"] for p in c.get("ports", [])}


def test_every_port_has_one_rule_with_its_own_sources_and_none_is_open_to_all() -> None:
    spec = _policy()["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "catalog-warden"}}
    by_port = {}
    for rule in spec["ingress"]:
        assert rule.get("from"), f"ingress rule {rule} has no sources: it admits every client"
        (port,) = rule["ports"]
        by_port[port["port"]] = rule["from"]
    assert by_port == EXPECTED_PEERS
    assert set(by_port) == _container_ports()


def test_the_control_plane_placeholder_is_explained_in_the_install_guide() -> None:
    assert PLACEHOLDER in (REPO / "docs" / "install.md").read_text()
    assert "catalog-warden.io/monitoring" in (REPO / "docs" / "install.md").read_text()
