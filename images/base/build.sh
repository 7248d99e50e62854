#!/usr/bin/env bash
# A local Python base image for machines that reach no container registry: a minimal Debian
# root filesystem from debootstrap (python3, python3-venv, CA certificates), turned into an
# image with `docker import`. The image Dockerfiles take it as BASE_IMAGE instead of
# python:3.11-slim. Skipped when the tag already exists (delete the image to rebuild).
#
#   images/base/build.sh [TAG]        default TAG: faasrl/base:bookworm
#   DEBIAN_MIRROR=http://... images/base/build.sh
set -euo pipefail

tag=${1:-faasrl/base:bookworm}
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base image $tag exists"
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    echo "debootstrap is missing: run 'make docker-engine' (installs it) or apt-get install debootstrap" >&2
    exit 1
fi

root=$(mktemp -d /var/tmp/faasrl-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    "$suite" "$root" "$mirror"
# What an image never needs: package lists, caches, docs, man pages, translations.
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/* "$root"/var/log/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/usr/share/locale/* "$root"/tmp/* "$root"/root/.cache
python=$(chroot "$root" python3 -c 'import platform; print(platform.python_version())')
tar --numeric-owner -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' \
    --change "LABEL org.opencontainers.image.title=faasrl-base faasrl.python=$python faasrl.suite=$suite" \
    - "$tag"
echo "built $tag (Debian $suite, Python $python)"
