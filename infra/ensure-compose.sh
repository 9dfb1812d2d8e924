#!/usr/bin/env bash
# Makes `docker compose config` available for the tests that validate docker-compose.yml (no
# Docker engine is needed for that, only the CLI plugin). Idempotent: does nothing when the
# plugin answers, or when there is no docker CLI at all (those tests then skip, saying why).
# Otherwise builds the Compose plugin from the Go module proxy into ~/.docker/cli-plugins. A build
# that fails is reported and leaves the tests to skip: the plugin is optional, the run is not.
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
# Built as the main module from its own checkout: `go install module@version` refuses modules
# whose go.mod has exclude or replace directives, which Compose's has.
if ! source_dir=$(go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || [[ -z "$source_dir" ]]; then
    echo "ensure-compose: could not fetch the Compose module; compose tests will skip" >&2
    exit 0
fi
cp -r "$source_dir" "$build/src"
chmod -R u+w "$build/src"
if ! (cd "$build/src" && go build -o "$build/docker-compose" ./cmd); then
    echo "ensure-compose: the Compose build failed; compose tests will skip" >&2
    exit 0
fi
mv "$build/docker-compose" "$plugins/docker-compose"
docker compose version >&2 || echo "ensure-compose: the built plugin does not answer; compose tests will skip" >&2
