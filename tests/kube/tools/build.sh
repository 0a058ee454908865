#!/bin/sh
# Builds etcd, kube-apiserver, kube-controller-manager, kubectl (from ./go.mod) and helm (from
# ./helm/go.mod) into DEST. Used by `make kube-bins`; see docs/testing-on-kubernetes.md.
#
# Exits 0 without building when Go or the module proxy is missing, after saying so: the tests
# under tests/kube then skip with that reason. Any other failure is an error.
set -eu
DEST=${1:?usage: build.sh DEST}
HERE=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=v1.36.3
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly

if ! command -v go >/dev/null 2>&1; then
    echo "kube-bins: no Go toolchain on PATH; not building (tests/kube will skip)" >&2
    exit 0
fi
if ! (cd "$HERE" && go mod download k8s.io/kubernetes >/dev/null 2>&1); then
    echo "kube-bins: cannot fetch k8s.io/kubernetes from the Go module proxy ($(go env GOPROXY));" \
        "not building (tests/kube will skip)" >&2
    exit 0
fi

# One build at a time per DEST: a second `make test` waits for the first build, then finds it done.
mkdir -p "$(dirname "$DEST")"
exec 9>"$DEST.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi
if [ -f "$DEST/.stamp" ]; then
    exit 0
fi

V=k8s.io/component-base/version
CV=k8s.io/client-go/pkg/version
NOW=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS="-s -w"
for p in $V $CV; do
    LDFLAGS="$LDFLAGS -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=36"
    LDFLAGS="$LDFLAGS -X $p.gitTreeState=clean -X $p.buildDate=$NOW"
done

TMP="$DEST.tmp.$$"
rm -rf "$TMP"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' INT TERM HUP
echo "kube-bins: building Kubernetes $K8S_VERSION binaries into $DEST (a cold build takes minutes)" >&2
start=$(date +%s)
(cd "$HERE" && go build -trimpath -ldflags "$LDFLAGS" -o "$TMP/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubectl)
(cd "$HERE" && go build -trimpath -ldflags "-s -w" -o "$TMP/etcd" go.etcd.io/etcd/server/v3)
(cd "$HERE/helm" && go build -trimpath -ldflags "-s -w" -o "$TMP/helm" helm.sh/helm/v4/cmd/helm)
mkdir -p "$DEST"
for b in etcd kube-apiserver kube-controller-manager kubectl helm; do
    mv "$TMP/$b" "$DEST/$b"
done
echo "$K8S_VERSION built in $(( $(date +%s) - start ))s" > "$DEST/.stamp"
echo "kube-bins: done in $(( $(date +%s) - start ))s: $(ls "$DEST" | tr '\n' ' ')" >&2
