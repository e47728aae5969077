#!/usr/bin/env bash
# What CI runs for the lab (called from .ci/run): install what the lab needs, build or reuse
# the Go binaries, bring the lab up, export its env and run the lab tests. Any missing piece
# fails loudly; the lab tests fail (never skip) when CI is set and the lab is missing.
#   BRICK_LAB_DOWN=1  tear the lab down afterwards (default: leave it up for later suites)
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
say() { echo "[lab/ci] $*"; }
die() { echo "[lab/ci] FAILED: $*" >&2; exit 1; }

# --- system packages: Prometheus (Debian) and openssl ----------------------------------------
missing=()
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} with apt-get"
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/tmp/lab-ci-apt.log 2>&1 \
      || die "apt-get install ${missing[*]} failed (log: /tmp/lab-ci-apt.log)"
  else
    die "missing ${missing[*]} and not root: apt-get install -y ${missing[*]}"
  fi
fi
# the Debian prometheus package starts its own service on :9090; the lab runs its own on :19090

# --- Go toolchain and the binaries (cached under ~/.cache/brickadmin-lab/<version>) -------------
[ -x /usr/local/go/bin/go ] && PATH="/usr/local/go/bin:$PATH"
export PATH
if ! command -v go >/dev/null 2>&1; then
  source lab/versions.env
  if [ ! -x "${BRICK_LAB_CACHE:-$HOME/.cache/brickadmin-lab}/$K8S_VERSION/bin/kube-apiserver" ]; then
    die "Go is not installed and the lab binaries are not cached: the lab cannot be built"
  fi
fi
b0=$(date +%s)
bin="$(bash lab/build.sh | tail -1)" || die "lab/build.sh could not build the lab binaries"
# helm too: the chart tests (helm lint, helm template + a server-side dry run) need it
[ -x "$bin/helm" ] || die "lab/build.sh did not leave helm in $bin"
export BRICK_LAB_HELM="$bin/helm"
say "binaries ready in $(( $(date +%s) - b0 ))s ($("$bin/helm" version --short 2>/dev/null))"

# --- Python ------------------------------------------------------------------------------------
PY="${BRICK_LAB_PYTHON:-}"
[ -z "$PY" ] && [ -x .venv/bin/python ] && PY="$PWD/.venv/bin/python"
[ -z "$PY" ] && PY="$(command -v python3)"
"$PY" -c "import kubernetes, yaml, pytest, django" 2>/dev/null \
  || die "$PY lacks the project's packages (pip install -r requirements.txt)"
export BRICK_LAB_PYTHON="$PY"

# --- the lab -----------------------------------------------------------------------------------
u0=$(date +%s)
# Tear down what this run starts (a lab that was already up is someone else's: left alone),
# unless BRICK_LAB_KEEP=1 keeps it for a later run.
if lab/status >/dev/null 2>&1; then was_up=1; else was_up=0; fi
lab/up || die "lab/up failed"
say "lab up in $(( $(date +%s) - u0 ))s"
source "${BRICK_LAB_DIR:-/tmp/brickadmin-lab}/env" || die "no lab env file"
export BRICK_LAB_KUBECONFIG BRICK_LAB_PROMETHEUS_URL BRICK_LAB_GPUSIM_URL BRICK_LAB_DIR BRICK_LAB_KUBECTL
export CI="${CI:-true}"   # in this script a missing lab is a failure, never a skip
if [ "${BRICK_LAB_DOWN:-0}" = 1 ] || { [ "$was_up" = 0 ] && [ "${BRICK_LAB_KEEP:-0}" != 1 ]; }; then
  trap 'lab/status | tail -1; lab/down >/dev/null && say "lab down (it was started by this run; BRICK_LAB_KEEP=1 keeps it)"' EXIT
fi

# --- the lab tests -----------------------------------------------------------------------------
"$PY" -m pytest tests/lab -m lab -q -p no:cacheprovider --durations=25
rc=$?
if [ $rc = 5 ]; then die "pytest collected no lab tests"; fi
# then the other suites' lab tests (marker lab outside tests/lab: procedures, workspaces),
# which bin/test leaves out of its "not lab" run
rc2=0
if [ "${BRICK_LAB_ONLY_OWN:-0}" != 1 ]; then
  "$PY" -m pytest tests -m lab --ignore=tests/lab -q -p no:cacheprovider --durations=25
  rc2=$?
  [ $rc2 = 5 ] && rc2=0   # none there is fine
fi
say "lab tests exit $rc (tests/lab) and $rc2 (other lab tests), total $(( $(date +%s) - t0 ))s"
[ $rc = 0 ] && [ $rc2 = 0 ]
