#!/usr/bin/env bash
# Makes, without any image registry, the base images that
# deploy/docker/Dockerfile and docker-compose.yml pull:
#
#   debian:trixie-slim                          debootstrap --variant=minbase
#   golang:1.26                                 that + this host's Go toolchain
#   gcr.io/distroless/static-debian13:nonroot   CA certificates, time zones, uid 65532
#   nats:<version>-alpine                       nats-server built from its Go module
#
# For air-gapped hosts and CI. Each image is tagged with the name the
# Dockerfile and compose file use, so both build and run unchanged; an image
# already present is kept. Needs root (debootstrap), docker, Go, a Debian
# mirror and a Go module proxy.
#
#   deploy/offline/base-images.sh
#
# NATS_VERSION picks the nats-server version (default: the one pkg/go.mod
# pins, which the services embed and test against). DEBIAN_MIRROR overrides
# the Debian mirror. The host's local CA certificates (EXTRA_CA_DIR, default
# /usr/local/share/ca-certificates: a TLS-inspecting proxy's, a private
# module proxy's) go into the Debian base, so that every image installing
# ca-certificates on it (the Go build, the tool-runner) trusts them as the
# host does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
extra_ca=${EXTRA_CA_DIR:-/usr/local/share/ca-certificates}
go_version=$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')
nats_version=${NATS_VERSION:-$(cd "$root/pkg" && GOWORK=off go list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)}
nats_version=${nats_version#v}

have() { docker image inspect "$1" >/dev/null 2>&1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The legacy builder: these Dockerfiles need no BuildKit, and a docker CLI
# without buildx cannot use BuildKit.
export DOCKER_BUILDKIT=0

if have debian:trixie-slim; then
  echo "debian:trixie-slim present"
else
  debootstrap --variant=minbase trixie "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
  if compgen -G "$extra_ca/*.crt" >/dev/null; then
    mkdir -p "$work/rootfs/usr/local/share/ca-certificates"
    cp "$extra_ca"/*.crt "$work/rootfs/usr/local/share/ca-certificates/"
  fi
  tar -C "$work/rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - debian:trixie-slim
  rm -rf "$work/rootfs"
fi

if have "golang:$go_version"; then
  echo "golang:$go_version present"
else
  docker build -q -t "golang:$go_version" -f "$here/golang.Dockerfile" "$(go env GOROOT)"
fi

if have gcr.io/distroless/static-debian13:nonroot; then
  echo "gcr.io/distroless/static-debian13:nonroot present"
else
  docker build -q -t gcr.io/distroless/static-debian13:nonroot -f "$here/static.Dockerfile" "$here"
fi

if have "nats:$nats_version-alpine"; then
  echo "nats:$nats_version-alpine present"
else
  mkdir -p "$work/nats"
  GOBIN="$work/nats" CGO_ENABLED=0 GOWORK=off go install -trimpath -ldflags=-s \
    "github.com/nats-io/nats-server/v2@v$nats_version"
  docker build -q -t "nats:$nats_version-alpine" --build-arg "VERSION=$nats_version" \
    -f "$here/nats.Dockerfile" "$work/nats"
fi
