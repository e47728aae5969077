#!/usr/bin/env bash
# Build (or reuse) the lab's Go binaries, cached outside the checkout, keyed by version.
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl  from k8s.io/kubernetes
#   etcd                                                              from go.etcd.io/etcd/server/v3 (the version kubernetes pins)
#   kwok                                                              from sigs.k8s.io/kwok
#   kube-state-metrics                                                from k8s.io/kube-state-metrics/v2 (if served)
#   helm                                                              from helm.sh/helm/v3 (the chart tests)
#   kueue (controller manager, its CRDs and webhook manifests)        from sigs.k8s.io/kueue
# Usage: lab/build.sh            (prints the bin dir on stdout's last line)
#        lab/build.sh helm       (only helm: the chart tests need nothing else)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/versions.env"

if ! command -v go >/dev/null 2>&1; then
  for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do [ -x "$g" ] && PATH="$(dirname "$g"):$PATH"; done
fi
if ! command -v go >/dev/null 2>&1; then
  echo "lab/build.sh: Go is not installed (no 'go' on PATH). The lab builds Kubernetes from source and needs Go >= 1.24." >&2
  exit 2
fi
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
CACHE="${BRICK_LAB_CACHE:-$HOME/.cache/brickadmin-lab}"
BIN="$CACHE/$K8S_VERSION/bin"
mkdir -p "$BIN"
log() { echo "[lab/build] $*" >&2; }

# A Go program from a module at an exact version, through a tiny wrapper module that requires
# it: `go install ...@version` reads the module's version list (for deprecations), which the
# proxy refuses for some modules (kube-state-metrics).
#   build_pinned <wrapper dir> <module> <version> <go version> <package> <output> <ldflags>
build_pinned() {
  local dir=$1 module=$2 version=$3 gover=$4 pkg=$5 out=$6 ld=$7
  mkdir -p "$dir"; cd "$dir"
  printf 'module brickadmin.lab/wrapper\n\ngo %s\n\nrequire %s %s\n' "$gover" "$module" "$version" > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" > tools.go
  go mod tidy -e >&2 || true
  go build -tags tools -trimpath -ldflags "$ld" -o "$out.tmp.$$" "$pkg" >&2
  mv "$out.tmp.$$" "$out"
}

# ---- Helm (deploy/chart: helm lint, helm template) ----------------------------------------
build_helm() {
  if [ ! -x "$BIN/helm-$HELM_VERSION" ]; then
    log "building helm $HELM_VERSION"
    build_pinned "$CACHE/helm-$HELM_VERSION-wrapper" helm.sh/helm/v3 "$HELM_VERSION" 1.24.0 helm.sh/helm/v3/cmd/helm \
      "$BIN/helm-$HELM_VERSION" "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  fi
  ln -sf "helm-$HELM_VERSION" "$BIN/helm"
}
if [ "${1:-}" = helm ]; then build_helm; echo "$BIN"; exit 0; fi
build_helm

# ---- Kubernetes control plane -------------------------------------------------------------
k8s_bins="kube-apiserver kube-controller-manager kube-scheduler kubectl etcd"
need=0; for b in $k8s_bins; do [ -x "$BIN/$b" ] || need=1; done
if [ $need = 1 ]; then
  SRC="$CACHE/$K8S_VERSION/wrapper"
  mkdir -p "$SRC"; cd "$SRC"
  log "fetching k8s.io/kubernetes@$K8S_VERSION go.mod"
  modjson="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION")"
  gomod="$(printf '%s' "$modjson" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  stg="v0.${K8S_VERSION#v1.}"
  {
    echo "module brickadmin.lab/k8swrapper"
    echo
    grep -E '^go [0-9]' "$gomod"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    # every staging module the kubernetes go.mod replaces with a local path
    grep -E '^\s*k8s.io/[A-Za-z0-9_.-]+ => \./staging/' "$gomod" | awk -v v="$stg" '{print "replace " $1 " => " $1 " " v}'
  } > go.mod
  cat > tools.go <<GO
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  # etcd 3.6 from the same module graph (Debian's etcd 3.4 has no watch progress requests,
  # so the API server refuses client-go's streaming lists and KWOK misses new pods).
  mkdir -p etcd
  cat > etcd/main.go <<GO
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  log "resolving modules (go mod tidy)"
  go mod tidy -e >&2 || true
  go mod download >&2 || true
  pkg="k8s.io/component-base/version"
  cpkg="k8s.io/client-go/pkg/version"
  ld="-s -w"
  for p in $pkg $cpkg; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "building $k8s_bins ($K8S_VERSION) — several minutes on 2 cores"
  t0=$(date +%s)
  tmp="$BIN/.tmp.$$"; mkdir -p "$tmp"
  go build -tags tools -trimpath -ldflags "$ld" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl >&2
  go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" ./etcd >&2
  mv "$tmp"/* "$BIN/"; rmdir "$tmp"
  log "kubernetes binaries built in $(( $(date +%s) - t0 ))s"
fi

# ---- KWOK ---------------------------------------------------------------------------------
if [ ! -x "$BIN/kwok-$KWOK_VERSION" ]; then
  log "building kwok $KWOK_VERSION"
  GOBIN="$BIN/.kwok.$$" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
  mv "$BIN/.kwok.$$/kwok" "$BIN/kwok-$KWOK_VERSION"; rmdir "$BIN/.kwok.$$"
fi
ln -sf "kwok-$KWOK_VERSION" "$BIN/kwok"

# ---- kube-state-metrics -------------------------------------------------------------------
if [ ! -x "$BIN/kube-state-metrics-$KSM_VERSION" ]; then
  log "building kube-state-metrics $KSM_VERSION"
  build_pinned "$CACHE/$K8S_VERSION/ksm-wrapper" k8s.io/kube-state-metrics/v2 "$KSM_VERSION" 1.23.0 \
    k8s.io/kube-state-metrics/v2 "$BIN/kube-state-metrics-$KSM_VERSION" \
    "-s -w -X github.com/prometheus/common/version.Version=${KSM_VERSION#v}"
fi
ln -sf "kube-state-metrics-$KSM_VERSION" "$BIN/kube-state-metrics"

# ---- Kueue --------------------------------------------------------------------------------
# Built with the module's own go.mod (its requirements, as Kueue's release is built); its CRDs
# and webhook manifests are copied beside the binary so lab/up needs no module cache.
if [ ! -x "$BIN/kueue-$KUEUE_VERSION" ] || [ ! -f "$BIN/kueue-$KUEUE_VERSION.config/webhook/manifests.yaml" ]; then
  log "building kueue $KUEUE_VERSION"
  t0=$(date +%s)
  kdir="$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  [ -d "$kdir/cmd/kueue" ] || { echo "lab/build.sh: sigs.k8s.io/kueue@$KUEUE_VERSION has no cmd/kueue" >&2; exit 3; }
  (cd "$kdir" && go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
    -o "$BIN/kueue-$KUEUE_VERSION.tmp.$$" ./cmd/kueue >&2)
  rm -rf "$BIN/kueue-$KUEUE_VERSION.config.tmp"
  mkdir -p "$BIN/kueue-$KUEUE_VERSION.config.tmp/crd" "$BIN/kueue-$KUEUE_VERSION.config.tmp/webhook"
  cp "$kdir"/config/components/crd/bases/*.yaml "$BIN/kueue-$KUEUE_VERSION.config.tmp/crd/"
  cp "$kdir"/config/components/webhook/manifests.yaml "$BIN/kueue-$KUEUE_VERSION.config.tmp/webhook/"
  chmod -R u+w "$BIN/kueue-$KUEUE_VERSION.config.tmp"
  rm -rf "$BIN/kueue-$KUEUE_VERSION.config"
  mv "$BIN/kueue-$KUEUE_VERSION.config.tmp" "$BIN/kueue-$KUEUE_VERSION.config"
  mv "$BIN/kueue-$KUEUE_VERSION.tmp.$$" "$BIN/kueue-$KUEUE_VERSION"
  log "kueue built in $(( $(date +%s) - t0 ))s"
fi
ln -sf "kueue-$KUEUE_VERSION" "$BIN/kueue"
ln -sfn "kueue-$KUEUE_VERSION.config" "$BIN/kueue.config"

echo "$BIN"
