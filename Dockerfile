# syntax=docker/dockerfile:1
#
# gateway-dns container image.
#
#   docker build -t gateway-dns:0.1.0 --build-arg GATEWAY_DNS_REVISION=$(git rev-parse --short=12 HEAD) .
#
# The build context has no .git: the revision that `--version` and `gateway_dns_build_info`
# show comes from the GATEWAY_DNS_REVISION build argument (`unknown` without it), and the
# build date from SOURCE_DATE_EPOCH when given (build.rs).
# Build stage: the official Rust image (Debian bookworm). BuildKit cache mounts keep the
# downloaded crates and the compiled dependencies between builds, so a source change only
# recompiles gateway-dns itself.
ARG RUST_VERSION=1.92

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
ARG GATEWAY_DNS_REVISION=unknown
ARG SOURCE_DATE_EPOCH
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY benches ./benches
COPY examples ./examples
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin gateway-dns \
    && cp target/release/gateway-dns /gateway-dns

# Final stage: distroless "cc" (glibc, libgcc, CA certificates; no shell, no package manager),
# the same Debian release as the build stage so the glibc the binary links against matches.
# The binary brings its own allocator (mimalloc, see src/main.rs), so this choice is about
# the C runtime alone.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /gateway-dns /gateway-dns
# distroless's "nonroot" user; the Deployment runs as the same UID/GID.
USER 65532:65532
# 8443: admission webhook (HTTPS, --listen); 9090: metrics and /healthz (HTTP,
# --metrics-listen); 5353: the embedded DNS server (UDP and TCP, --dns-listen).
EXPOSE 8443/tcp 9090/tcp 5353/udp 5353/tcp
ENTRYPOINT ["/gateway-dns"]
CMD ["--help"]
