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
    # make up prints `export FAASRL_TOKEN=...` for the CLI. Run again from that shell, the same
    # token must not reach the gateway as a change of its environment: compose would recreate
    # it, and a running job would lose its round. So a FAASRL_TOKEN that a gateway made without
    # one already keeps is not passed.
    if [[ -n ${FAASRL_TOKEN:-} ]]; then
        id=$(compose ps -q gateway 2>/dev/null || true)
        if [[ -n $id ]] && ! docker inspect -f '{{join .Config.Env "\n"}}' "$id" \
                | grep -q '^FAASRL_TOKEN=' \
            && [[ $(docker exec "$id" faasrl token 2>/dev/null) == "$FAASRL_TOKEN" ]]; then
            unset FAASRL_TOKEN
        fi
    fi
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
