"""The HelmClusterAddonChart naming function reproduces operator-helm's names byte for byte."""

import pytest

from policies.charts_naming import helm_cluster_addon_chart_name


@pytest.mark.parametrize(
    ("repo", "chart", "want"),
    [
        # reference B5 test vectors
        ("podinfo", "podinfo", "podinfo-chart-podinfo"),
        ("a-very-long-repository-name-x", "ingress-nginx", "a-very-long-reposito-chart-ingress-nginx-dec14d9642db"),
        ("bitnami", "kube-prometheus-stack-operator", "bitnami-chart-kube-prometheus-stac-e844fc35bf4f"),
        # operator-helm api/naming/naming_test.go golden cases
        ("example", "podinfo", "example-chart-podinfo"),
        (
            "yandex-cloud-marketplace-mirror",
            "cert-manager-webhook-yandex",
            "yandex-cloud-marketp-chart-cert-manager-webhook-a3ee4a8a584e",
        ),
        ("repo", "", "repo-chart"),
        # exactly 20 bytes is not truncated, so no hash
        ("r" * 20, "c" * 20, "r" * 20 + "-chart-" + "c" * 20),
    ],
)
def test_helm_cluster_addon_chart_name_vectors(repo, chart, want):
    assert helm_cluster_addon_chart_name(repo, chart) == want


def test_trailing_dashes_are_trimmed_before_the_hash_postfix():
    # chart[:20] ends in "-": Go's strings.TrimRight(result, "-") drops it, then the hash follows.
    name = helm_cluster_addon_chart_name("repo", "abcdefghijklmnopqrs--tail")
    assert name.startswith("repo-chart-abcdefghijklmnopqrs-")
    assert not name.startswith("repo-chart-abcdefghijklmnopqrs--")
    assert len(name) == len("repo-chart-abcdefghijklmnopqrs") + 1 + 12


def test_longest_name_is_sixty_bytes():
    assert len(helm_cluster_addon_chart_name("r" * 63, "c" * 200)) == 20 + 7 + 20 + 13
