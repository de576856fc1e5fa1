#!/usr/bin/env bash
# Makes podman usable without a daemon for `make test-image` (test/image): installs podman,
# runc and their helpers from Debian when podman is missing (as root, with apt-get; otherwise
# it says what to install and exits non-zero), then checks that podman answers with the
# settings that the image test passes on every call:
#
#   --runtime runc --cgroup-manager cgroupfs --events-backend file --storage-driver vfs
#
# Those settings are what a machine without systemd, with cgroups that a container cannot
# manage and without overlay mounts needs: crun and the systemd cgroup manager fail there, the
# journald event log has no journal, and overlay on top of the machine's own overlay does not
# mount. The test also passes --ulimit nofile and nproc to `podman run`, because podman's
# defaults ask for more than the machine's hard limits. The test keeps its images and
# containers in a storage of its own (--root, --runroot), so nothing here changes the
# machine's podman configuration.
set -euo pipefail

# slirp4netns gives the test's container a network of its own that still reaches the host's
# loopback (PostgreSQL, the test's receiver); uidmap and fuse-overlayfs are what podman needs
# beyond that for a user other than root or the overlay driver.
packages=(podman runc uidmap slirp4netns fuse-overlayfs)

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 || ! command -v slirp4netns >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-podman: podman, runc or slirp4netns is missing; install them with: apt-get install -y ${packages[*]}" >&2
    exit 1
  fi
  echo "ensure-podman: installing ${packages[*]} from Debian"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${packages[@]}"; then
    apt-get -o DPkg::Lock::Timeout=600 update
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${packages[@]}"
  fi
fi

if [ ! -c /dev/net/tun ]; then
  echo "ensure-podman: /dev/net/tun is missing, so slirp4netns cannot give a container its network; run the machine (or its container) with /dev/net/tun" >&2
  exit 1
fi

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
if ! out="$(podman --root "$root/storage" --runroot "$root/run" --storage-driver vfs \
  --runtime runc --cgroup-manager cgroupfs --events-backend file info --format '{{.Version.Version}}' 2>&1)"; then
  echo "ensure-podman: podman is installed but does not answer: $out" >&2
  exit 1
fi
echo "ensure-podman: podman $out and $(runc --version | head -n1) are ready"
