#!/usr/bin/env bash
# KVM test host for egress-proxies integration tests and benchmarks.
#
#   bash scripts/kvm-test-host.sh up     # make this Debian 12 machine a KVM test host (idempotent)
#   bash scripts/kvm-test-host.sh env    # print the coordinates (KEY=value lines)
#   bash scripts/kvm-test-host.sh down   # stop what `up` started
#
# Runs as root on Debian 12 without systemd. `up` installs the packages it needs (only when
# missing), creates the libvirt-qemu user, a test-host qemu.conf and libvirt's directories,
# starts virtlogd then libvirtd (pidfiles under /run), warms the QEMU capability probe,
# makes a running `default` dir pool and an inactive `egress-inactive` pool, and starts a
# private sshd on 127.0.0.1:2222 with its own host key, a client key, authorized_keys and
# a known_hosts file. State lives in /var/lib/egress-kvm-test-host/; the coordinates are
# written to /var/lib/egress-kvm-test-host/env. A second `up` with everything running only
# checks and rewrites the env file.
#
# qemu.conf: `up` compares settings, not bytes (comments, blank lines and spacing do not count).
# When the settings already are a test host's, the file is left alone, whoever started libvirtd.
# Otherwise the original is kept under the state directory and the test host's file written
# (refused, with the file untouched, while a libvirtd this script did not start is running), and
# `down` puts the original back (or removes the file when there was none).
#
# For testing this script itself (test/scripts/kvm-test-host.test.ts): KVM_TEST_HOST_STATE and
# KVM_TEST_HOST_QEMU_CONF move the state directory and qemu.conf elsewhere, and the script can
# be sourced (its functions are defined, nothing runs).
set -euo pipefail

STATE=${KVM_TEST_HOST_STATE:-/var/lib/egress-kvm-test-host}
QEMU_CONF_FILE=${KVM_TEST_HOST_QEMU_CONF:-/etc/libvirt/qemu.conf}
ENV_FILE=$STATE/env
SSH_DIR=$STATE/ssh
POOLS_DIR=$STATE/pools
STARTED_DIR=$STATE/started

SSH_HOST=127.0.0.1
SSH_PORT=2222
SSH_USER=root
URI=qemu:///system
SOCKET=/run/libvirt/libvirt-sock
POOL=default
INACTIVE_POOL=egress-inactive

VIRTLOGD=/usr/sbin/virtlogd
LIBVIRTD=/usr/sbin/libvirtd
SSHD=/usr/sbin/sshd
VIRTLOGD_PIDFILE=/run/virtlogd.pid
LIBVIRTD_PIDFILE=/run/libvirtd.pid
SSHD_PIDFILE=/run/egress-kvm-test-host-sshd.pid

PACKAGES=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 qemu-utils openssh-server)

log() { printf 'kvm-test-host: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------------------------------
# Processes: a daemon counts as ours when its pidfile names a live process whose
# executable is the expected binary (a zombie counts as exited).

pid_alive() { # pid exe
  local pid=$1 exe=$2 state
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$exe" ]] || return 1
  state=$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  [[ -n $state && $state != Z ]]
}

pidfile_pid() { # pidfile -> prints the pid or nothing
  [[ -r $1 ]] && tr -dc '0-9' <"$1" || true
}

running() { # pidfile exe
  pid_alive "$(pidfile_pid "$1")" "$2"
}

wait_for() { # description tries command...  (tries of 20 ms each)
  local what=$1 tries=$2
  shift 2
  for ((i = 0; i < tries; i++)); do
    if "$@" 2>/dev/null; then return 0; fi
    sleep 0.02
  done
  die "timed out waiting for $what"
}

stop_pid() { # name pidfile exe : SIGTERM, then SIGKILL after ~10 s; only our own process
  local name=$1 pidfile=$2 exe=$3 pid marker
  pid=$(pidfile_pid "$pidfile")
  marker=$(cat "$STARTED_DIR/$name" 2>/dev/null || true)
  if [[ -z $pid || $pid != "$marker" ]]; then
    [[ -n $pid ]] && pid_alive "$pid" "$exe" && log "$name (pid $pid) was not started by this script; leaving it"
    rm -f "$STARTED_DIR/$name"
    return 0
  fi
  if pid_alive "$pid" "$exe"; then
    kill -TERM "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true # a test may have left it stopped
    for ((i = 0; i < 500; i++)); do pid_alive "$pid" "$exe" || break; sleep 0.02; done
    if pid_alive "$pid" "$exe"; then
      log "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$STARTED_DIR/$name" "$pidfile"
}

# ---------------------------------------------------------------------------------------
# up

ensure_packages() {
  local missing=() pkg status
  declare -A installed=()
  # One dpkg-query for all; it prints nothing for a package it has never heard of.
  while read -r pkg status; do
    [[ $status == ii ]] && installed[$pkg]=1
  done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${PACKAGES[@]}" 2>/dev/null || true)
  for pkg in "${PACKAGES[@]}"; do
    [[ -n ${installed[$pkg]:-} ]] || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "installing ${missing[*]}"
  local made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    # Keep maintainer scripts from starting services (sshd on :22) during the install.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  local rc=0
  {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"
  } >&2 || rc=$?
  [[ $made_policy -eq 1 ]] && rm -f /usr/sbin/policy-rc.d
  [[ $rc -eq 0 ]] || die "apt-get failed (exit $rc)"
}

ensure_user() {
  getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
  getent passwd libvirt-qemu >/dev/null ||
    useradd --system --gid libvirt-qemu --no-create-home --home-dir /var/lib/libvirt \
      --shell /usr/sbin/nologin libvirt-qemu
}

# Writes $2 to $1 when the content differs; returns 0 when it wrote.
write_if_changed() {
  local file=$1 content=$2
  if [[ -f $file ]] && [[ "$(cat "$file")" == "$content" ]]; then return 1; fi
  printf '%s\n' "$content" >"$file.tmp.$$"
  mv -f "$file.tmp.$$" "$file"
  return 0
}

QEMU_CONF_MARK='# Written by egress-proxies scripts/kvm-test-host.sh'
QEMU_CONF="$QEMU_CONF_MARK: a test host, not a production one.
user = \"root\"
group = \"root\"
swtpm_user = \"root\"
swtpm_group = \"root\"
security_driver = \"none\""

# The settings of a libvirt config file, one line each, in order: comments, blank lines and
# whitespace outside double quotes removed, so `user="root"  # ours` equals `user = "root"`.
qemu_conf_settings() { # file
  awk '{
    out = ""; quoted = 0
    for (i = 1; i <= length($0); i++) {
      c = substr($0, i, 1)
      if (quoted) {
        out = out c
        if (c == "\\") { i++; out = out substr($0, i, 1) } else if (c == "\"") quoted = 0
        continue
      }
      if (c == "#") break
      if (c == "\"") quoted = 1
      if (c != " " && c != "\t" && c != "\r") out = out c
    }
    if (out != "") print out
  }' "$1"
}

libvirtd_started_here() {
  [[ -n "$(pidfile_pid "$LIBVIRTD_PIDFILE")" && "$(pidfile_pid "$LIBVIRTD_PIDFILE")" == "$(cat "$STARTED_DIR/libvirtd" 2>/dev/null || true)" ]]
}

# Makes qemu.conf hold the test host's settings. Sets QEMU_CONF_CHANGED=1 when it wrote.
apply_qemu_conf() {
  QEMU_CONF_CHANGED=0
  if [[ -f $QEMU_CONF_FILE ]] && [[ "$(qemu_conf_settings "$QEMU_CONF_FILE")" == "$(qemu_conf_settings <(printf '%s\n' "$QEMU_CONF"))" ]]; then
    return 0 # the same settings: leave the file, comments and all, as it is
  fi
  if running "$LIBVIRTD_PIDFILE" "$LIBVIRTD" && ! libvirtd_started_here; then
    die "libvirtd (pid $(pidfile_pid "$LIBVIRTD_PIDFILE")) was not started by this script, and $QEMU_CONF_FILE does not have a test host's settings ($(qemu_conf_settings <(printf '%s\n' "$QEMU_CONF") | paste -sd ' ')); $QEMU_CONF_FILE is left as it is: stop that libvirtd or give it those settings, then run up again"
  fi
  # Keep what was there before the first write, for `down` to put back.
  if [[ ! -e $STATE/qemu.conf.orig && ! -e $STATE/qemu.conf.absent ]]; then
    if [[ ! -e $QEMU_CONF_FILE ]]; then
      : >"$STATE/qemu.conf.absent"
    elif ! grep -qF "$QEMU_CONF_MARK" "$QEMU_CONF_FILE"; then
      cp -p "$QEMU_CONF_FILE" "$STATE/qemu.conf.orig"
    fi
  fi
  write_if_changed "$QEMU_CONF_FILE" "$QEMU_CONF" || true
  QEMU_CONF_CHANGED=1
  log "wrote $QEMU_CONF_FILE"
}

# On `down`: the original qemu.conf back (or none, when there was none), unless someone changed
# the test host's file since.
restore_qemu_conf() {
  local ours=0
  [[ -f $QEMU_CONF_FILE && "$(cat "$QEMU_CONF_FILE")" == "$QEMU_CONF" ]] && ours=1
  if [[ -f $STATE/qemu.conf.orig ]]; then
    if [[ $ours -eq 0 && -e $QEMU_CONF_FILE ]]; then
      log "$QEMU_CONF_FILE was changed since up; leaving it (the original is $STATE/qemu.conf.orig)"
      return 0
    fi
    cp -p "$STATE/qemu.conf.orig" "$QEMU_CONF_FILE.tmp.$$"
    mv -f "$QEMU_CONF_FILE.tmp.$$" "$QEMU_CONF_FILE"
    rm -f "$STATE/qemu.conf.orig"
    log "restored the original $QEMU_CONF_FILE"
  elif [[ -e $STATE/qemu.conf.absent ]]; then
    if [[ $ours -eq 1 ]]; then
      rm -f "$QEMU_CONF_FILE"
      log "removed $QEMU_CONF_FILE (there was none before up)"
    fi
    rm -f "$STATE/qemu.conf.absent"
  fi
}

ensure_dirs_and_config() {
  mkdir -p "$(dirname "$QEMU_CONF_FILE")" /var/log/libvirt /var/lib/libvirt /var/cache/libvirt /run/libvirt /run/sshd
  install -d -m 0700 "$STATE" "$SSH_DIR" "$STARTED_DIR"
  install -d -m 0711 "$POOLS_DIR"
  install -d -m 0755 "$POOLS_DIR/$POOL" "$POOLS_DIR/$INACTIVE_POOL"
  apply_qemu_conf
}

start_virtlogd() {
  running "$VIRTLOGD_PIDFILE" "$VIRTLOGD" && return 0
  rm -f "$VIRTLOGD_PIDFILE"
  "$VIRTLOGD" --daemon --pid-file="$VIRTLOGD_PIDFILE" 9>&-
  wait_for virtlogd 250 running "$VIRTLOGD_PIDFILE" "$VIRTLOGD"
  pidfile_pid "$VIRTLOGD_PIDFILE" >"$STARTED_DIR/virtlogd"
  wait_for "virtlogd socket" 250 test -S /run/libvirt/virtlogd-sock
  log "started virtlogd (pid $(pidfile_pid "$VIRTLOGD_PIDFILE"))"
}

start_libvirtd() {
  if running "$LIBVIRTD_PIDFILE" "$LIBVIRTD"; then
    [[ $QEMU_CONF_CHANGED -eq 1 ]] || return 0
    log "qemu.conf changed; restarting libvirtd"
    stop_pid libvirtd "$LIBVIRTD_PIDFILE" "$LIBVIRTD"
    running "$LIBVIRTD_PIDFILE" "$LIBVIRTD" && die "libvirtd runs but was not started by this script; cannot apply qemu.conf"
  fi
  rm -f "$LIBVIRTD_PIDFILE"
  # No --timeout: a long-lived system daemon must not exit when idle.
  "$LIBVIRTD" --daemon --pid-file="$LIBVIRTD_PIDFILE" 9>&-
  wait_for libvirtd 500 running "$LIBVIRTD_PIDFILE" "$LIBVIRTD"
  pidfile_pid "$LIBVIRTD_PIDFILE" >"$STARTED_DIR/libvirtd"
  wait_for "libvirtd socket" 500 test -S "$SOCKET"
  log "started libvirtd (pid $(pidfile_pid "$LIBVIRTD_PIDFILE"))"
}

virsh_q() { virsh -q -c "$URI" "$@"; }

# Tests freeze libvirtd with SIGSTOP for a moment (and test runs of several people may share
# this host): wait up to ~10 s for it to be resumed, and only then resume a leftover freeze.
thaw_libvirtd() {
  local pid state
  pid=$(pidfile_pid "$LIBVIRTD_PIDFILE")
  for ((i = 0; i < 500; i++)); do
    state=$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [[ $state == T ]] || return 0
    sleep 0.02
  done
  log "libvirtd (pid $pid) has been stopped (SIGSTOP) for 10 s; sending SIGCONT"
  kill -CONT "$pid" 2>/dev/null || true
}

# One virsh call reads the pool list (and, on a fresh daemon, pays the ~8 s QEMU
# capability probe once so that no test pays it inside its timeout).
ensure_pools() {
  local listing name state
  listing=$(virsh_q "version; pool-list --all") || die "virsh cannot reach $URI"
  declare -A pools=()
  while read -r name state _; do
    [[ -n $name ]] && pools[$name]=$state
  done < <(printf '%s\n' "$listing" | awk 'NF >= 3 && ($2 == "active" || $2 == "inactive") {print $1, $2}')

  local cmds=()
  if [[ -z ${pools[$POOL]:-} ]]; then
    cmds+=("pool-define-as $POOL dir --target $POOLS_DIR/$POOL" "pool-autostart $POOL" "pool-start $POOL")
  elif [[ ${pools[$POOL]} != active ]]; then
    cmds+=("pool-start $POOL")
  fi
  if [[ -z ${pools[$INACTIVE_POOL]:-} ]]; then
    cmds+=("pool-define-as $INACTIVE_POOL dir --target $POOLS_DIR/$INACTIVE_POOL")
  elif [[ ${pools[$INACTIVE_POOL]} == active ]]; then
    # A libvirtd restart revives a defined dir pool whose target exists: stop it again.
    cmds+=("pool-destroy $INACTIVE_POOL")
  fi
  if [[ ${#cmds[@]} -gt 0 ]]; then
    local joined
    joined=$(printf '%s; ' "${cmds[@]}")
    virsh_q "$joined" >/dev/null || die "virsh failed: $joined"
  fi
  # The default pool may predate this script with another target: report the real one.
  POOL_DIR=$(virsh_q pool-dumpxml "$POOL" | sed -n 's:.*<path>\(.*\)</path>.*:\1:p' | head -n1)
  [[ -n $POOL_DIR ]] || die "cannot read the target path of pool $POOL"
}

ensure_ssh_material() {
  [[ -f $SSH_DIR/host_ed25519_key ]] || ssh-keygen -q -t ed25519 -N '' -C egress-kvm-test-host -f "$SSH_DIR/host_ed25519_key"
  [[ -f $SSH_DIR/id_ed25519 ]] || ssh-keygen -q -t ed25519 -N '' -C egress-kvm-test-client -f "$SSH_DIR/id_ed25519"
  write_if_changed "$SSH_DIR/authorized_keys" "$(cat "$SSH_DIR/id_ed25519.pub")" || true
  chmod 0600 "$SSH_DIR/authorized_keys"
  write_if_changed "$SSH_DIR/known_hosts" "[$SSH_HOST]:$SSH_PORT $(cut -d' ' -f1,2 "$SSH_DIR/host_ed25519_key.pub")" || true
  SSHD_CONF_CHANGED=0
  if write_if_changed "$SSH_DIR/sshd_config" "# Written by egress-proxies scripts/kvm-test-host.sh
ListenAddress $SSH_HOST
Port $SSH_PORT
HostKey $SSH_DIR/host_ed25519_key
PidFile $SSHD_PIDFILE
AuthorizedKeysFile $SSH_DIR/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding local
AllowStreamLocalForwarding yes
AllowAgentForwarding no
X11Forwarding no
PermitTTY no
MaxStartups 200:30:400
MaxSessions 64
LogLevel VERBOSE"; then SSHD_CONF_CHANGED=1; fi
}

sshd_listening() { (exec 3<>"/dev/tcp/$SSH_HOST/$SSH_PORT") 2>/dev/null; }

start_sshd() {
  if running "$SSHD_PIDFILE" "$SSHD"; then
    if [[ $SSHD_CONF_CHANGED -eq 1 ]]; then
      "$SSHD" -t -f "$SSH_DIR/sshd_config" || die "sshd_config does not pass sshd -t"
      kill -HUP "$(pidfile_pid "$SSHD_PIDFILE")" 9>&-
      log "sshd_config changed; sshd reloaded"
    fi
    return 0
  fi
  rm -f "$SSHD_PIDFILE"
  "$SSHD" -t -f "$SSH_DIR/sshd_config" || die "sshd_config does not pass sshd -t"
  # Absolute paths: sshd re-executes itself from / on SIGHUP.
  "$SSHD" -f "$SSH_DIR/sshd_config" -E "$SSH_DIR/sshd.log" 9>&-
  wait_for sshd 250 running "$SSHD_PIDFILE" "$SSHD"
  pidfile_pid "$SSHD_PIDFILE" >"$STARTED_DIR/sshd"
  wait_for "sshd on $SSH_HOST:$SSH_PORT" 250 sshd_listening
  log "started sshd on $SSH_HOST:$SSH_PORT (pid $(pidfile_pid "$SSHD_PIDFILE"))"
}

write_env() {
  write_if_changed "$ENV_FILE" "KVM_TEST_SOCKET=$SOCKET
KVM_TEST_URI=$URI
KVM_TEST_POOL=$POOL
KVM_TEST_POOL_DIR=$POOL_DIR
KVM_TEST_INACTIVE_POOL=$INACTIVE_POOL
KVM_TEST_SSH_HOST=$SSH_HOST
KVM_TEST_SSH_PORT=$SSH_PORT
KVM_TEST_SSH_USER=$SSH_USER
KVM_TEST_SSH_KEY=$SSH_DIR/id_ed25519
KVM_TEST_KNOWN_HOSTS=$SSH_DIR/known_hosts
KVM_TEST_LIBVIRTD_PIDFILE=$LIBVIRTD_PIDFILE
KVM_TEST_SSHD_PIDFILE=$SSHD_PIDFILE" || true
}

cmd_up() {
  ensure_packages
  ensure_user
  ensure_dirs_and_config
  start_virtlogd
  start_libvirtd
  thaw_libvirtd
  ensure_pools
  ensure_ssh_material
  start_sshd
  write_env
}

cmd_down() {
  if running "$LIBVIRTD_PIDFILE" "$LIBVIRTD" && [[ "$(pidfile_pid "$LIBVIRTD_PIDFILE")" == "$(cat "$STARTED_DIR/libvirtd" 2>/dev/null || true)" ]]; then
    kill -CONT "$(pidfile_pid "$LIBVIRTD_PIDFILE")" 2>/dev/null || true
    # QEMU processes outlive libvirtd: destroy running guests first.
    local dom
    while read -r dom; do
      [[ -n $dom ]] || continue
      virsh_q destroy "$dom" >/dev/null && log "destroyed guest $dom" || log "could not destroy guest $dom"
    done < <(virsh_q list --name 2>/dev/null || true)
  fi
  stop_pid sshd "$SSHD_PIDFILE" "$SSHD"
  stop_pid libvirtd "$LIBVIRTD_PIDFILE" "$LIBVIRTD"
  stop_pid virtlogd "$VIRTLOGD_PIDFILE" "$VIRTLOGD"
  restore_qemu_conf
  rm -f "$ENV_FILE"
}

cmd_env() {
  [[ -f $ENV_FILE ]] || die "no $ENV_FILE: run '$0 up' first"
  cat "$ENV_FILE"
}

main() {
  [[ $(id -u) -eq 0 ]] || die "must run as root"
  local cmd=${1:-}
  case $cmd in
    up | down) ;;
    env) cmd_env; return ;;
    *) die "usage: $0 up|down|env" ;;
  esac
  mkdir -p "$STATE" && chmod 0700 "$STATE"
  # Serialise concurrent runs (several test processes may call `up` at once).
  exec 9>"$STATE/lock"
  flock 9
  "cmd_$cmd"
}

# Sourced (by the script's own test): define the functions only.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
