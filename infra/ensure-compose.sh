#!/usr/bin/env bash
# Makes `docker compose config` available for the tests that validate docker-compose.yml (no
# Docker engine is needed for that, only the CLI plugin). Idempotent: does nothing when the
# plugin answers, or when there is no docker CLI at all (those tests then skip, saying why).
# Otherwise builds the Compose plugin from the Go module proxy into ~/.docker/cli-plugins.
set -euo pipefail

COMPOSE_VERSION=v2.40.3
command -v docker >/dev/null 2>&1 || exit 0
docker compose version >/dev/null 2>&1 && exit 0
if ! command -v go >/dev/null 2>&1; then
    echo "ensure-compose: no Go toolchain to build the Compose plugin; compose tests will skip" >&2
    exit 0
fi
plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
mkdir -p "$plugins"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
echo "ensure-compose: building docker compose $COMPOSE_VERSION (once)" >&2
GOBIN="$build" go install "github.com/docker/compose/v2/cmd@$COMPOSE_VERSION"
mv "$build/cmd" "$plugins/docker-compose"
docker compose version >&2
