#!/usr/bin/env bash
# Installs what the browser tests need, once: Debian's Chromium (driven by Playwright from PyPI,
# which never downloads a browser of its own here) and a CJK font so Chinese memories render.
# Idempotent: apt-get runs only when something is missing. Needs root (or sudo) for apt-get.
set -euo pipefail

want=()
command -v chromium >/dev/null 2>&1 || [[ -x /usr/bin/chromium ]] || want+=(chromium)
fc-list 2>/dev/null | grep -qi "wenquanyi\|noto sans cjk" || want+=(fonts-wqy-microhei)

if [[ ${#want[@]} -eq 0 ]]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure.sh: missing ${want[*]} and no apt-get; install them, then rerun" >&2
    exit 1
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { echo "ensure.sh: apt-get needs root" >&2; exit 1; }
    sudo=(sudo)
fi
echo "ensure.sh: installing ${want[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
