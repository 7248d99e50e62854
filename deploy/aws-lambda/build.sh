#!/usr/bin/env bash
# Build the Lambda image of a faasrl function: faasrl/lambda-<function>:latest.
#   deploy/aws-lambda/build.sh [FUNCTION] [BASE_IMAGE]
# FUNCTION defaults to actor, BASE_IMAGE to faasrl/runtime (images/: built from this checkout).
# awslambdaric's wheels are downloaded here on the host for the image's Python (3.11, x86_64),
# so the build itself needs no network.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
function="${1:-actor}"
base="${2:-faasrl/runtime}"
pip="${PIP:-$here/../../.venv/bin/pip}"
version="$(grep -i '^awslambdaric==' "$here/../../constraints.txt" | cut -d= -f3)"
rm -rf "$here/wheels" && mkdir -p "$here/wheels"
"$pip" download --disable-pip-version-check --quiet --only-binary=:all: \
    --python-version 3.11 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --dest "$here/wheels" "awslambdaric==${version}"
docker build --build-arg BASE_IMAGE="$base" --build-arg FUNCTION="$function" \
    --tag "faasrl/lambda-$function:latest" "$here"
