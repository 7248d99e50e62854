#!/usr/bin/env bash
# Make a headless browser available for the dashboard's tests (tests/ui/): Debian's chromium and
# chromium-driver, installed where missing. Idempotent: nothing to do where both are there.
# Exits non-zero, saying why, where they cannot be had (the ui tests then skip, saying why).
set -euo pipefail

packages=()
[[ -x /usr/bin/chromium ]] || packages+=(chromium)
[[ -x /usr/bin/chromedriver ]] || packages+=(chromium-driver)
if ((${#packages[@]})); then
    if [[ $(id -u) != 0 ]]; then
        echo "browser: need root to install ${packages[*]}" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null; then
        echo "browser: no apt-get here to install ${packages[*]}" >&2
        exit 1
    fi
    echo "browser: installing ${packages[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${packages[@]}" >/dev/null
fi
echo "browser: $(/usr/bin/chromium --version 2>/dev/null || echo 'chromium: no version')," \
     "$(/usr/bin/chromedriver --version 2>/dev/null | cut -d' ' -f1-2)"
