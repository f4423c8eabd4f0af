#!/usr/bin/env bash
# A private podman for the real container suite (test/real/images.test.ts), on a machine with no
# Docker engine and no registry to pull from:
#
#   container-stand-ins.sh up DIR     installs podman & co. when missing (apt-get); writes a podman
#                                     configuration under DIR (its own image store, run state, network
#                                     files and temp space); loads the local stand-in base images into
#                                     that store under the exact names Dockerfile, Dockerfile.proxy and
#                                     docker-compose.yml use. The stand-ins are built once (debootstrap
#                                     of Debian 12 from the machine's Debian mirror) and kept in
#                                     $EGRESS_TEST_CACHE (default /var/cache/egress-proxies-test),
#                                     keyed by this script's hash and the host files they copy.
#   container-stand-ins.sh env DIR    the variables that point podman at DIR, as KEY=value lines.
#   container-stand-ins.sh down DIR   removes every pod, container, network, volume and image of DIR's
#                                     store, what podman leaves on the host whatever its configuration
#                                     says (/run/containers, /run/libpod, /var/lib/containers when `up`
#                                     did not find them, NETAVARK iptables chains), puts
#                                     net.ipv4.ip_forward back as `up` found it, and removes DIR.
#
# Nothing is pulled: builds use --pull=never, and the private registries.conf blocks the registries the
# project's files name, so a missing image fails instead of reaching the network.
# Root only (overlay storage, netavark). The stand-ins are facts of this machine, never of the project's
# files: the node stand-in carries the host's node and npm, and the host's locally added CA certificates
# (an intercepting TLS proxy sits between this machine and the npm registry) as NODE_EXTRA_CA_CERTS.
set -euo pipefail

SELF="$(readlink -f "${BASH_SOURCE[0]}")"
CACHE="${EGRESS_TEST_CACHE:-/var/cache/egress-proxies-test}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=(podman podman-compose buildah runc netavark aardvark-dns iptables uidmap debootstrap catatonit)
STAND_INS=(localhost/debian:bookworm docker.io/library/node:20-bookworm-slim gcr.io/distroless/nodejs20-debian12:nonroot docker.io/library/redis:7)
HOST_DIRS=(/run/containers /run/libpod /var/lib/containers)

die() {
  echo "container-stand-ins: $*" >&2
  exit 1
}

usage() {
  echo "usage: $0 up|env|down DIR" >&2
  exit 2
}

[[ $# -eq 2 ]] || usage
CMD="$1"
DIR="$2"
[[ "$DIR" = /* ]] || die "DIR must be absolute: $DIR"

print_env() {
  cat <<EOF
CONTAINERS_CONF=$DIR/containers.conf
CONTAINERS_STORAGE_CONF=$DIR/storage.conf
CONTAINERS_REGISTRIES_CONF=$DIR/registries.conf
TMPDIR=$DIR/tmp
BUILDAH_FORMAT=docker
EOF
}

use_env() {
  while IFS='=' read -r key value; do export "$key=$value"; done < <(print_env)
}

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  echo "container-stand-ins: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 ||
    { DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; }
}

# The chains of every table, one "tool table chain" a line.
list_chains() {
  local tool table
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    for table in filter nat mangle raw; do
      "$tool" -t "$table" -S 2>/dev/null | awk -v t="$tool" -v tb="$table" '$1 == "-N" { print t, tb, $2 }' || true
    done
  done
}

write_config() {
  mkdir -p "$DIR"/{storage,run,tmp,networks,libpod-tmp}
  chmod 700 "$DIR"
  # crun 1.8 refuses this machine's hybrid cgroup mount; no systemd (PID 1 is not systemd); root lacks
  # CAP_SYS_RESOURCE, so podman's default nofile (1048576) cannot be set; nproc at most conmon's 32768.
  cat >"$DIR/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$DIR/events.log"
tmp_dir = "$DIR/libpod-tmp"

[network]
network_backend = "netavark"
network_config_dir = "$DIR/networks"
EOF
  cat >"$DIR/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$DIR/storage"
runroot = "$DIR/run"
EOF
  # No search registries, and the registries the project's files name are blocked: a missing image fails.
  cat >"$DIR/registries.conf" <<EOF
unqualified-search-registries = []
short-name-mode = "permissive"
EOF
  local r
  for r in docker.io registry-1.docker.io gcr.io ghcr.io quay.io registry.k8s.io k8s.gcr.io; do
    printf '\n[[registry]]\nprefix = "%s"\nlocation = "%s"\nblocked = true\n' "$r" "$r" >>"$DIR/registries.conf"
  done
}

record_host_state() {
  [[ -f "$DIR/host-state/ip_forward" ]] && return 0
  mkdir -p "$DIR/host-state"
  sysctl -n net.ipv4.ip_forward >"$DIR/host-state/ip_forward"
  list_chains >"$DIR/host-state/chains"
  : >"$DIR/host-state/made-dirs"
  local d
  for d in "${HOST_DIRS[@]}"; do [[ -e "$d" ]] || echo "$d" >>"$DIR/host-state/made-dirs"; done
}

cache_key() {
  {
    sha256sum "$SELF"
    sha256sum "$(readlink -f "$(command -v node)")"
    cat /usr/local/share/ca-certificates/*.crt 2>/dev/null | sha256sum
    echo "$MIRROR"
  } | sha256sum | cut -c1-16
}

# Builds the four stand-ins into the store of the current environment and saves them to $1.
build_stand_ins() {
  local archive="$1" work
  work="$(mktemp -d "$DIR/tmp/stand-ins.XXXXXX")"
  echo "container-stand-ins: building the stand-in base images (once per version of this script)" >&2
  debootstrap --variant=minbase --include=ca-certificates,tzdata bookworm "$work/root" "$MIRROR" >&2
  cat >"$work/root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  # As Debian's official images do: apt removes its package caches after every run (an image layer that
  # runs apt-get keeps none of them) and installs no recommends.
  cat >"$work/root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'APT::Install-Recommends "false";' >"$work/root/etc/apt/apt.conf.d/docker-no-recommends"
  rm -rf "$work/root"/usr/share/{doc,man,info,locale}/* "$work/root"/var/lib/apt/lists/* "$work/root"/var/cache/apt/*.bin "$work/root"/var/cache/apt/archives/*.deb
  tar -C "$work/root" -c . | podman import --change 'CMD ["bash"]' - localhost/debian:bookworm >&2
  rm -rf "$work/root"

  # node:20-bookworm-slim: the host's node and npm, a `node` user 1000:1000.
  mkdir -p "$work/node"
  cp "$(readlink -f "$(command -v node)")" "$work/node/node"
  cp -a "$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")" "$work/node/npm"
  cat /usr/local/share/ca-certificates/*.crt >"$work/node/extra-ca.pem" 2>/dev/null || : >"$work/node/extra-ca.pem"
  cat >"$work/node/Containerfile" <<'EOF'
FROM localhost/debian:bookworm
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY extra-ca.pem /usr/local/share/egress-stand-in/extra-ca.pem
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd -g 1000 node && useradd -u 1000 -g node -m -s /bin/bash node
ENV NODE_EXTRA_CA_CERTS=/usr/local/share/egress-stand-in/extra-ca.pem
CMD ["node"]
EOF
  podman build --pull=never -q -t docker.io/library/node:20-bookworm-slim "$work/node" >&2

  # gcr.io/distroless/nodejs20-debian12:nonroot: no shell; node, the libraries it links, CA bundle, tzdata.
  mkdir -p "$work/distroless"
  cp "$work/node/node" "$work/distroless/node"
  cat >"$work/distroless/Containerfile" <<'EOF'
FROM localhost/debian:bookworm AS files
COPY node /out/nodejs/bin/node
RUN set -e; cd /out; \
    for lib in $(ldd nodejs/bin/node | awk '/=>/ { print $3 } /^\t\/lib64/ { print $1 }'); do \
      mkdir -p ".$(dirname "$lib")"; cp -L "$lib" ".$lib"; done; \
    mkdir -p etc/ssl/certs usr/share tmp home/nonroot; chmod 1777 tmp; chown 65532:65532 home/nonroot; \
    cp /etc/ssl/certs/ca-certificates.crt etc/ssl/certs/; cp -a /usr/share/zoneinfo usr/share/; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >etc/passwd; \
    printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >etc/group
FROM scratch
COPY --from=files /out /
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532
WORKDIR /home/nonroot
ENTRYPOINT ["/nodejs/bin/node"]
EOF
  podman build --pull=never -q -t gcr.io/distroless/nodejs20-debian12:nonroot "$work/distroless" >&2

  # redis:7: Debian's redis-server 7.0; like the official image, protected mode off (the compose network reaches it).
  mkdir -p "$work/redis"
  cat >"$work/redis/entrypoint.sh" <<'EOF'
#!/bin/sh
set -e
case "$1" in -*) set -- redis-server "$@" ;; esac
if [ "$1" = redis-server ]; then shift; set -- redis-server --protected-mode no "$@"; fi
exec "$@"
EOF
  cat >"$work/redis/Containerfile" <<'EOF'
FROM localhost/debian:bookworm
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* && mkdir /data
COPY --chmod=755 entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /data
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
EOF
  podman build --pull=never -q -t docker.io/library/redis:7 "$work/redis" >&2

  rm -rf "$work"
  mkdir -p "$(dirname "$archive")"
  podman save -q -m --format docker-archive -o "$archive.partial" "${STAND_INS[@]}" >&2
  mv "$archive.partial" "$archive"
}

up() {
  [[ $(id -u) -eq 0 ]] || die "needs root (overlay storage, netavark)"
  install_missing
  record_host_state
  write_config
  use_env
  local archive
  archive="$CACHE/stand-ins-$(cache_key).tar"
  if [[ -f "$archive" ]]; then
    podman load -q -i "$archive" >&2
  else
    # Older versions of the cache are of no use to this script.
    rm -f "$CACHE"/stand-ins-*.tar
    build_stand_ins "$archive"
  fi
  local image
  for image in "${STAND_INS[@]}"; do podman image exists "$image" || die "stand-in $image missing after load"; done
}

remove_new_chains() {
  [[ -f "$DIR/host-state/chains" ]] || return 0
  local new tool table chain
  new="$(list_chains | grep -v -x -F -f "$DIR/host-state/chains" | grep -E ' (NETAVARK|CNI|PODMAN)' || true)"
  [[ -n "$new" ]] || return 0
  # Flush the new chains (their jumps to each other go), then drop every jump to them from the old
  # chains, then delete them.
  while read -r tool table chain; do "$tool" -t "$table" -F "$chain"; done <<<"$new"
  while read -r tool table chain; do
    "$tool" -t "$table" -S | { grep -E -- "-j $chain( |\$)" || true; } | sed 's/^-A /-D /' | while read -r rule; do
      # shellcheck disable=SC2086 # a rule is words as iptables -S prints them
      eval "$tool -t $table $rule"
    done
  done <<<"$new"
  while read -r tool table chain; do "$tool" -t "$table" -X "$chain"; done <<<"$new"
}

down() {
  [[ -d "$DIR" ]] || return 0
  if [[ -f "$DIR/containers.conf" ]]; then
    use_env
    podman pod rm -af -t 0 >/dev/null 2>&1 || true
    podman rm -af -t 0 >/dev/null 2>&1 || true
    podman network prune -f >/dev/null 2>&1 || true
    podman volume prune -f >/dev/null 2>&1 || true
    podman system reset -f >/dev/null 2>&1 || true
  fi
  if [[ -d "$DIR/host-state" ]]; then
    remove_new_chains
    local d
    while read -r d; do [[ -n "$d" ]] && rm -rf "$d"; done <"$DIR/host-state/made-dirs"
    sysctl -q -w "net.ipv4.ip_forward=$(cat "$DIR/host-state/ip_forward")"
  fi
  # overlay mounts of a container that would not stop keep the store busy: unmount what is left under DIR.
  { grep -F " $DIR/" /proc/mounts || true; } | awk '{ print $2 }' | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf "$DIR"
}

case "$CMD" in
  up) up ;;
  env) print_env ;;
  down) down ;;
  *) usage ;;
esac
