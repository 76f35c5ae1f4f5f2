#!/usr/bin/env bash
# Builds the Docker Compose v2 CLI plugin from its Go module, for hosts
# whose Docker has no compose plugin and cannot download one (Debian's
# docker.io ships none). Needs Go and a reachable Go module proxy.
#
#   deploy/offline/compose-plugin.sh [DEST]
#
# DEST defaults to /usr/local/lib/docker/cli-plugins/docker-compose, where
# every docker CLI looks. An existing plugin of the same version is kept.
set -euo pipefail

version=${COMPOSE_VERSION:-v2.40.3}
dest=${1:-/usr/local/lib/docker/cli-plugins/docker-compose}

if [[ -x $dest ]] && [[ $("$dest" version --short 2>/dev/null) == "${version#v}" ]]; then
  echo "compose plugin $version already at $dest"
  exit 0
fi

# `go install module@version` refuses compose's go.mod (it has exclude
# directives), so build inside a copy of the module.
src=$(go mod download -json "github.com/docker/compose/v2@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -n $src ]] || { echo "compose-plugin: cannot download github.com/docker/compose/v2@$version" >&2; exit 1; }
work=$(mktemp -d)
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$src/." "$work"
chmod -R u+w "$work"
mkdir -p "$(dirname "$dest")"
(cd "$work" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOWORK=off go build -trimpath \
  -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$version" \
  -o "$dest.tmp" ./cmd)
mv "$dest.tmp" "$dest"
echo "compose plugin $version built at $dest"
