/**
 * The `startup-script` metadata item that goes with the user-data on gcp. Google's Debian 12
 * images run startup scripts (google-guest-agent) but ship no cloud-init, which would apply the
 * `user-data` item. On an image without cloud-init the script installs Debian's package once and
 * runs its stages, which apply this instance's user-data; on an image with cloud-init (and on every
 * later boot) it does nothing and cloud-init works on its own.
 */
export const GCE_STARTUP_SCRIPT = `#!/bin/sh
# egress-proxies: apply the user-data item through cloud-init on images that lack it.
set -eu
if command -v cloud-init >/dev/null 2>&1; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends cloud-init
cloud-init init
cloud-init modules --mode=config
cloud-init modules --mode=final
`;
