#!/usr/bin/env bash
# Builds the images the test node runs, without a registry, as Docker archives in OUT:
#
#   OUT/pause.tar        the sandbox image (tests/control-plane/cmd/pause, built beside `cluster`)
#   OUT/gateway-dns.tar  the repository's Dockerfile, unmodified, built with buildah
#
# The Dockerfile's two base images are replaced by local stand-ins under their exact names:
# - the runtime stage's distroless "cc" image: a root assembled from Debian packages
#   (base-files, netbase, tzdata, libc6, libgcc-s1, libstdc++6, libssl3, CA certificates),
#   user nonroot (65532);
# - the build stage's Rust image: busybox and a `cargo` that puts BINARY where the release
#   build would have left it. The image is thus built from the test binary, not by a second
#   release build inside it: every step of the Dockerfile runs, but the compile is not the
#   Dockerfile's own. `docker build .` with the public images compiles it.
#
# Usage: tests/control-plane/images.sh OUT BINARY [TAG]
#   TAG defaults to localhost/gateway-dns:test. Needs buildah, apt-get (Debian) and root.
# The Debian packages are downloaded once into $GATEWAY_DNS_CONTROL_PLANE/debs (or OUT/debs).
set -euo pipefail
out=${1:?usage: images.sh OUT BINARY [TAG]}
binary=${2:?usage: images.sh OUT BINARY [TAG]}
tag=${3:-localhost/gateway-dns:test}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
tools=${GATEWAY_DNS_CONTROL_PLANE:-${XDG_CACHE_HOME:-$HOME/.cache}/gateway-dns/control-plane}
pause="$tools/bin/pause"
[ -x "$pause" ] || { echo "images.sh: $pause is not built (tests/control-plane/build.sh)" >&2; exit 1; }
[ -x "$binary" ] || { echo "images.sh: $binary is not an executable" >&2; exit 1; }

# buildah keeps its storage in OUT (vfs: no mounts to undo) and leaves nothing elsewhere.
work="$out/work"
rm -rf "$work"
mkdir -p "$work"
bh() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

# The names the Dockerfile pulls.
rust_version=$(sed -n 's/^ARG RUST_VERSION=//p' "$repo/Dockerfile")
build_base="docker.io/library/rust:${rust_version}-bookworm"
runtime_base=$(sed -n 's/^FROM \([^ ]*distroless[^ ]*\).*/\1/p' "$repo/Dockerfile")
[ -n "$rust_version" ] && [ -n "$runtime_base" ] || { echo "images.sh: the Dockerfile's base images were not found" >&2; exit 1; }

# Debian packages, downloaded once.
debs="$tools/debs"
mkdir -p "$debs"
packages=(base-files netbase tzdata libc6 libgcc-s1 libstdc++6 libssl3 busybox-static)
missing=()
for p in "${packages[@]}"; do
  compgen -G "$debs/${p}_*.deb" >/dev/null || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  (cd "$debs" && apt-get download "${missing[@]}" >/dev/null 2>&1) || {
    apt-get update -qq
    (cd "$debs" && apt-get download "${missing[@]}" >/dev/null)
  }
fi

# Runtime stand-in: the packages' files, the nonroot user, the CA bundle, a writable /tmp.
root="$work/runtime-root"
mkdir -p "$root"
for p in base-files netbase tzdata libc6 libgcc-s1 libstdc++6 libssl3; do
  dpkg-deb -x "$(compgen -G "$debs/${p}_*.deb" | head -1)" "$root"
done
mkdir -p "$root/etc/ssl/certs" "$root/home/nonroot" "$root/tmp"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"
chown 65532:65532 "$root/home/nonroot"
c=$(bh from scratch)
bh copy --quiet "$c" "$root/" / >/dev/null
bh config --user 65532:65532 --workingdir /home/nonroot --env PATH=/usr/local/bin:/usr/bin:/bin "$c"
bh commit --quiet "$c" "$runtime_base" >/dev/null
bh rm "$c" >/dev/null

# Build stand-in: busybox for the shell and cp, and the cargo that replays the test build.
root="$work/build-root"
mkdir -p "$root/bin" "$root/usr/local/cargo/bin" "$root/opt/prebuilt" "$root/tmp"
dpkg-deb -x "$(compgen -G "$debs/busybox-static_*.deb" | head -1)" "$work/busybox"
cp "$work/busybox/bin/busybox" "$root/bin/busybox"
for applet in sh cp mkdir cat; do ln -s busybox "$root/bin/$applet"; done
# Debug information is of no use in the image; without it the test binary is a fraction of the size.
objcopy --strip-debug "$binary" "$root/opt/prebuilt/gateway-dns"
cat >"$root/usr/local/cargo/bin/cargo" <<'EOF'
#!/bin/sh
# A stand-in for cargo in the test world's Rust image: it puts the test binary where
# `cargo build --release --bin gateway-dns` would have written it, and refuses anything else.
case "$*" in
  "build --release --locked --bin gateway-dns") ;;
  *) echo "stand-in cargo: only 'build --release --locked --bin gateway-dns' is replayed, not '$*'" >&2; exit 1 ;;
esac
mkdir -p target/release
cp /opt/prebuilt/gateway-dns target/release/gateway-dns
EOF
chmod 755 "$root/usr/local/cargo/bin/cargo"
chmod 1777 "$root/tmp"
c=$(bh from scratch)
bh copy --quiet "$c" "$root/" / >/dev/null
bh config --env PATH=/usr/local/cargo/bin:/bin "$c"
bh commit --quiet "$c" "$build_base" >/dev/null
bh rm "$c" >/dev/null

# The sandbox image.
c=$(bh from scratch)
bh copy --quiet "$c" "$pause" /pause >/dev/null
bh config --entrypoint '["/pause"]' --user 65535:65535 "$c"
bh commit --quiet "$c" localhost/gateway-dns-test/pause:1 >/dev/null
bh rm "$c" >/dev/null

# The Dockerfile as it is.
revision=$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
epoch=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
bh bud --quiet --pull=never --isolation chroot --layers=false \
  --build-arg "GATEWAY_DNS_REVISION=$revision" --build-arg "SOURCE_DATE_EPOCH=$epoch" -f "$repo/Dockerfile" -t "$tag" "$repo" >/dev/null

rm -f "$out/pause.tar" "$out/gateway-dns.tar"
bh push --quiet localhost/gateway-dns-test/pause:1 "docker-archive:$out/pause.tar:localhost/gateway-dns-test/pause:1"
bh push --quiet "$tag" "docker-archive:$out/gateway-dns.tar:$tag"
echo "$out/pause.tar"
echo "$out/gateway-dns.tar"
