#!/usr/bin/env bash
# Builds a stock-like Debian 12 cloud image offline from this machine's own Debian sources, for
# booting real proxy VMs in tests (and for trying the kvm provider without a downloaded cloud image).
#
#   scripts/vm-image.sh          build if needed; print the directory holding base.qcow2, vmlinuz, initrd.img
#   scripts/vm-image.sh --check  print the directory if it is built, else exit 1 (builds nothing)
#
# The image holds what a stock Debian cloud image brings — cloud-init, nodejs, the cloud kernel,
# systemd-networkd with DHCP — and no project code: the NoCloud seed the kvm provider attaches
# brings the proxy. It is cached outside the repository, keyed by this script's hash, in
# ${EGRESS_VM_IMAGE_CACHE:-/var/cache/egress-proxies/vm-image}/<hash>; a second run prints at once.
# Needs root (mmdebstrap --mode=root); installs mmdebstrap, e2fsprogs and qemu-utils when missing.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

self="$(readlink -f "$0")"
cache_root="${EGRESS_VM_IMAGE_CACHE:-/var/cache/egress-proxies/vm-image}"
key="$(sha256sum "$self" | cut -c1-16)"
out="$cache_root/$key"

say() { echo "vm-image: $*" >&2; }
die() { say "error: $*"; exit 1; }

built() { [[ -s "$out/base.qcow2" && -s "$out/vmlinuz" && -s "$out/initrd.img" ]]; }

case "${1:-}" in
  --check) built && { echo "$out"; exit 0; }; exit 1 ;;
  '') ;;
  *) die "usage: scripts/vm-image.sh [--check]" ;;
esac

if built; then echo "$out"; exit 0; fi
[[ $(id -u) -eq 0 ]] || die "building the image needs root (mmdebstrap --mode=root)"

need=()
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v qemu-img >/dev/null 2>&1 || need+=(qemu-utils)
if ((${#need[@]})); then
  say "installing ${need[*]}"
  # Waits for another apt run (a parallel setup) instead of failing on its lock.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
# Another run may have built it while this one waited for the lock.
if built; then echo "$out"; exit 0; fi

work="$(mktemp -d "$cache_root/.build-XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The machine's own Debian sources (deb822 .sources and one-line .list files that are enabled),
# so the build reaches whatever mirror or snapshot this machine's apt does.
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [[ -f "$f" ]] || continue
  grep -Eq '(^|[[:space:]/])debian(-security)?([[:space:]/]|$)' "$f" || continue
  sources+=("$f")
done
((${#sources[@]})) || die "no Debian apt sources found in /etc/apt"
say "building from ${sources[*]} into $out (about two minutes)"

started=$(date +%s)
mmdebstrap --variant=apt --mode=root --quiet \
  --aptopt='APT::Install-Recommends "false"' \
  --aptopt='Acquire::Check-Valid-Until "false"' \
  --include=systemd-sysv,udev,dbus,linux-image-cloud-amd64,initramfs-tools,cloud-init,nodejs,ca-certificates,iproute2,netbase,procps \
  --customize-hook='echo egress-vm > "$1/etc/hostname"' \
  --customize-hook='echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" > "$1/etc/fstab"' \
  --customize-hook='printf "[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n" > "$1/etc/systemd/network/10-dhcp.network"' \
  --customize-hook='chroot "$1" systemctl enable systemd-networkd' \
  --customize-hook='printf "datasource_list: [ NoCloud, None ]\nnetwork: {config: disabled}\nresize_rootfs: false\n" > "$1/etc/cloud/cloud.cfg.d/90-egress-vm.cfg"' \
  --customize-hook='rm -f "$1/etc/resolv.conf"; : > "$1/etc/resolv.conf"' \
  --customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer' \
  --customize-hook='rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  --customize-hook='cp -L "$1/vmlinuz" "'"$work"'/vmlinuz"; cp -L "$1/initrd.img" "'"$work"'/initrd.img"' \
  bookworm "$work/rootfs" "${sources[@]}" >&2

# stdout carries only the directory printed at the end (callers run dir=$(scripts/vm-image.sh)).
mkfs.ext4 -q -F -L vmroot -d "$work/rootfs" "$work/disk.raw" 2G >&2
qemu-img convert -O qcow2 -c "$work/disk.raw" "$work/base.qcow2" >&2
rm -rf "$work/rootfs" "$work/disk.raw"
chmod 0644 "$work/base.qcow2" "$work/vmlinuz" "$work/initrd.img"
chmod 0755 "$work"
mv "$work" "$out"
trap - EXIT
say "built in $(($(date +%s) - started)) s: $(du -sh "$out" | cut -f1)"
echo "$out"
