#!/usr/bin/env bash
# The compose cluster: `deploy/cluster.sh up` starts it (images must be built: make up does
# both), waits until the gateway is healthy and prints URL and token; `deploy/cluster.sh down`.
# The token is FAASRL_TOKEN when set, else the one the gateway made at its first start and keeps
# in its state volume; `faasrl token` in the gateway's container reads either back.
set -euo pipefail
cd "$(dirname "$0")/.."

compose() {
    if docker compose version >/dev/null 2>&1; then docker compose "$@"; else docker-compose "$@"; fi
}

case ${1:-} in
up)
    compose up -d
    publish=${FAASRL_PUBLISH:-127.0.0.1:8080}
    url=http://$publish
    for _ in $(seq 120); do
        if python3 -c "import urllib.request as u; u.urlopen('$url/healthz', timeout=2)" 2>/dev/null; then
            token=$(compose exec -T gateway faasrl token)
            printf 'faasrl is up\n  gateway  %s   (API docs at %s/docs)\n  token    %s\n' \
                "$url" "$url" "$token"
            printf '  use it   export FAASRL_URL=%s FAASRL_TOKEN=%s\n' "$url" "$token"
            exit 0
        fi
        sleep 1
    done
    compose logs --tail 30 gateway >&2
    echo "the gateway did not become healthy within 120 s" >&2
    exit 1
    ;;
down)
    compose down
    ;;
*)
    echo "usage: deploy/cluster.sh up|down" >&2
    exit 2
    ;;
esac
