#!/usr/bin/env bash
# Local stand-ins for the registry images the shipped files name, for machines that reach no
# image registry (deploy/README.md, "Tests in containers"). Built once, cached by tag: an image
# that exists is kept. Run as root (debootstrap, chroot and rootful podman).
#
#   docker.io/library/debian:bookworm-slim  `debootstrap --variant=minbase bookworm` from Debian's mirror
#   docker.io/library/rust:1.95-bookworm    that + gcc/libc6-dev + this machine's Rust 1.95 toolchain
#   docker.io/library/postgres:15-bookworm  that base + Debian's postgresql-15, uid/gid 999, and an
#                                           entrypoint honouring the official image's variables
#                                           the units and the test kit use (below)
#
# The shipped Containerfile and units stay unchanged: they name these tags, and here the tags
# resolve to these local images. LYCHD_DEBIAN_MIRROR overrides the mirror.
set -euo pipefail

MIRROR=${LYCHD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SLIM=docker.io/library/debian:bookworm-slim
RUST=docker.io/library/rust:1.95-bookworm
PG=docker.io/library/postgres:15-bookworm

have() { podman image exists "$1"; }
if have "$SLIM" && have "$RUST" && have "$PG"; then
  echo "base-images: $SLIM, $RUST and $PG exist (cached)"
  exit 0
fi

work=$(mktemp -d /var/tmp/lychd-base.XXXXXX)
cleanup() {
  for m in "$work"/*/proc "$work"/*/dev/pts "$work"/*/dev "$work"/*/sys; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m" || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

slim_root="$work/slim"
echo "base-images: debootstrap --variant=minbase bookworm ($MIRROR)"
debootstrap --variant=minbase bookworm "$slim_root" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
  || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
rm -rf "$slim_root"/var/lib/apt/lists/* "$slim_root"/var/cache/apt/*.bin "$slim_root"/var/cache/apt/archives/*.deb

# A derived root: a copy of the slim one with packages from the mirror (host network, chroot).
derive() {
  local name=$1; shift
  local root="$work/$name"
  cp -a "$slim_root" "$root"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"; chmod +x "$root/usr/sbin/policy-rc.d"
  mount -t proc proc "$root/proc"
  chroot "$root" /bin/sh -c "$*" >"$work/$name.log" 2>&1 || { tail -n 30 "$work/$name.log" >&2; exit 1; }
  umount -l "$root/proc"
  rm -f "$root/usr/sbin/policy-rc.d"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  : >"$root/etc/resolv.conf"
}

import() { # root tag changes…
  local root=$1 tag=$2; shift 2
  local changes=()
  for c in "$@"; do changes+=(--change "$c"); done
  tar --numeric-owner -C "$root" -c . | podman import "${changes[@]}" - "$tag" >/dev/null
  echo "base-images: built $tag ($(podman image inspect --format '{{.Size}}' "$tag") bytes)"
}

have "$SLIM" || import "$slim_root" "$SLIM" 'CMD ["bash"]'

if ! have "$RUST"; then
  derive rust "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev ca-certificates pkg-config"
  sysroot=$(rustc +1.95.0 --print sysroot 2>/dev/null || rustc --print sysroot)
  case "$(rustc --version)" in "rustc 1.95."*) ;; *) echo "base-images: $RUST needs the host's Rust 1.95 (rustc --version: $(rustc --version))" >&2; exit 1;; esac
  install -d "$work/rust/usr/local/rust" "$work/rust/usr/local/cargo/bin"
  tar -C "$sysroot" --exclude=share/doc --exclude='lib/rustlib/src' -c . | tar -C "$work/rust/usr/local/rust" -x
  for b in "$work/rust/usr/local/rust/bin/"*; do ln -s "../../rust/bin/$(basename "$b")" "$work/rust/usr/local/cargo/bin/"; done
  import "$work/rust" "$RUST" \
    'ENV CARGO_HOME=/usr/local/cargo' \
    'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    'CMD ["bash"]'
fi

if ! have "$PG"; then
  derive pg "groupadd --system --gid 999 postgres && useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql --shell /bin/bash postgres \
    && mkdir -p /etc/postgresql-common && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf \
    && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 \
    && install -d -o postgres -g postgres -m 2777 /var/run/postgresql && install -d -o postgres -g postgres -m 0777 /var/lib/postgresql/data"
  install -m 0755 "$(dirname "$0")/postgres-entrypoint.sh" "$work/pg/usr/local/bin/docker-entrypoint.sh"
  import "$work/pg" "$PG" \
    'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    'ENV PGDATA=/var/lib/postgresql/data' \
    'ENV LANG=C.UTF-8' \
    'ENTRYPOINT ["docker-entrypoint.sh"]' \
    'EXPOSE 5432' \
    'STOPSIGNAL SIGINT' \
    'CMD ["postgres"]'
fi
