# Installs what the client tests need (sourced; bash). Usage:
#
#   source clients/ensure.sh && ensure_clients
#
# - TypeScript: `npm ci` in clients/typescript, redone only when package.json or
#   package-lock.json changed since the last install (a hash stamp inside node_modules, so
#   deleting node_modules also redoes it).
# - Java: nothing to install ahead; `mvn test` resolves its dependencies into ~/.m2 itself.
# Fails with a clear message when node (20+), npm, java (17+) or mvn is missing.

_HINDSIGHT_CLIENTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

_clients_log() { printf '[clients] %s\n' "$*" >&2; }

_clients_need() {
    if ! command -v "$1" >/dev/null 2>&1; then
        _clients_log "error: $1 is required for the client tests ($2)"
        return 1
    fi
}

ensure_clients() {
    local ts="$_HINDSIGHT_CLIENTS_DIR/typescript"
    _clients_need node "Node.js 20 or later" || return 1
    _clients_need npm "comes with Node.js" || return 1
    _clients_need java "a JDK 17 or later" || return 1
    _clients_need mvn "Apache Maven 3.8 or later" || return 1
    local node_major
    node_major=$(node -p 'process.versions.node.split(".")[0]')
    if ((node_major < 20)); then
        _clients_log "error: Node.js 20 or later is required, found $(node --version)"
        return 1
    fi

    local stamp="$ts/node_modules/.hindsight-install.sha256" want have=""
    want=$(cat "$ts/package.json" "$ts/package-lock.json" | sha256sum | cut -d' ' -f1)
    [[ -f "$stamp" ]] && have=$(<"$stamp")
    if [[ "$want" != "$have" ]]; then
        _clients_log "npm ci in clients/typescript (package-lock.json changed since the last install)"
        (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error) || return 1
        echo "$want" >"$stamp" # written only after a successful install
    fi
}
