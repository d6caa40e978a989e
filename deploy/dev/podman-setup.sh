#!/usr/bin/env bash
# Podman for the container tests (deploy/README.md, "Tests in containers"), idempotent:
# installs Debian's podman, runc and debootstrap when missing and makes podman usable on these machines:
# rootful with the `runc` runtime (crun fails on this kernel's cgroup setup) and no default
# ulimits (`default_ulimits = []`: the defaults cannot be applied here). Run as root (or with
# sudo available). Prints what it changed; changes nothing the second time.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
# deploy/dev/base-images.sh builds the local base images with it.
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  echo "podman-setup: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

conf=/etc/containers/containers.conf
marker="# lychd: podman-setup.sh"
if ! grep -qF "$marker" "$conf" 2>/dev/null; then
  if [ -s "$conf" ] && grep -Eq '^\[(containers|engine)\]' "$conf"; then
    echo "podman-setup: $conf already has [containers] or [engine]; set default_ulimits = [] and runtime = \"runc\" there by hand" >&2
    exit 1
  fi
  echo "podman-setup: configuring $conf (runc, default_ulimits = [])"
  as_root mkdir -p /etc/containers
  as_root tee -a "$conf" >/dev/null <<CONF
$marker
[containers]
default_ulimits = []

[engine]
runtime = "runc"
CONF
fi
podman info --format '{{.Host.OCIRuntime.Name}}' >/dev/null
