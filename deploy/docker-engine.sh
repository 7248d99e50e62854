#!/usr/bin/env bash
# Make a Docker engine available: nothing to do where one answers; otherwise install Debian's
# docker.io, docker-compose and debootstrap (for images/base/) where missing, and start dockerd
# in the background (log: /var/log/faasrl-dockerd.log). Needs root for the install and start.
# Exits non-zero, saying why, where no engine can run.
set -euo pipefail

if docker info >/dev/null 2>&1; then
    echo "Docker engine: running ($(docker version --format '{{.Server.Version}}'))"
    missing=""
else
    missing=1
fi
packages=()
command -v dockerd >/dev/null || packages+=(docker.io)
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 \
    || packages+=(docker-compose)
command -v debootstrap >/dev/null || packages+=(debootstrap)
if ((${#packages[@]})); then
    if [[ $(id -u) != 0 ]]; then
        echo "Docker engine: need root to install ${packages[*]}" >&2
        exit 1
    fi
    echo "Docker engine: installing ${packages[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${packages[@]}" >/dev/null
fi
[[ -z $missing ]] && exit 0

if [[ $(id -u) != 0 ]]; then
    echo "Docker engine: not running, and starting dockerd needs root" >&2
    exit 1
fi
echo "Docker engine: starting dockerd"
nohup dockerd >/var/log/faasrl-dockerd.log 2>&1 &
for _ in $(seq 60); do
    if docker info >/dev/null 2>&1; then
        echo "Docker engine: running ($(docker version --format '{{.Server.Version}}'))"
        exit 0
    fi
    kill -0 $! 2>/dev/null || break
    sleep 1
done
echo "Docker engine: dockerd did not come up; the end of /var/log/faasrl-dockerd.log:" >&2
tail -n 15 /var/log/faasrl-dockerd.log >&2
exit 1
