#!/usr/bin/env bash
# Build one faasrl image: runtime, runtime-gpu or platform.
#
#   images/build.sh runtime             # BASE_IMAGE=faasrl/base:bookworm unless set
#   BASE_IMAGE=python:3.11-slim images/build.sh platform    # where a registry is reachable
#
# Steps, each skipped when its inputs did not change: the base image (images/base/ when
# BASE_IMAGE is a faasrl/base tag), the wheelhouse for the base's Python (images/wheelhouse.py),
# a faasrl wheel, and the build context build/images/<image>/; then `docker build`, whose
# layer cache keeps the dependency layers as long as the wheelhouse is the same.
set -euo pipefail
cd "$(dirname "$0")/.."

image=${1:?usage: images/build.sh runtime|runtime-gpu|platform}
base=${BASE_IMAGE:-faasrl/base:bookworm}
tag=${IMAGE_TAG:-latest}
python=${PYTHON:-.venv/bin/python}
case $image in
    runtime|platform) dockerfile=images/$image/Dockerfile ;;
    runtime-gpu) dockerfile=images/runtime/Dockerfile ;;
    *) echo "unknown image $image (runtime, runtime-gpu, platform)" >&2; exit 2 ;;
esac
ctx=build/images/$image
mkdir -p "$ctx"

if [[ $base == faasrl/base:* ]]; then
    images/base/build.sh "$base"
elif ! docker image inspect "$base" >/dev/null 2>&1; then
    docker pull "$base"
fi
pyver=$(docker run --rm --network none "$base" python3 -c \
    'import platform; print(platform.python_version())')

# The wheelhouse, resolved for the base image's Python.
stamp=$(cat "images/$image/requirements.txt" constraints.txt images/wheelhouse.py \
        | sha256sum | cut -c1-16)-$pyver
if [[ "$(cat "$ctx/wheels.stamp" 2>/dev/null)" != "$stamp" ]]; then
    rm -rf "$ctx/wheels"
    "$python" images/wheelhouse.py --requirements "images/$image/requirements.txt" \
        --constraints constraints.txt --python "$pyver" --dest "$ctx/wheels"
    echo "$stamp" > "$ctx/wheels.stamp"
fi
cp "images/$image/requirements.txt" "$ctx/requirements.txt"

# faasrl itself as a wheel (its dependencies come from the wheelhouse), and the functions.
rm -rf "$ctx/dist" "$ctx/functions" build/lib build/bdist.*  # no stale modules in the wheel
"$python" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$ctx/dist" . \
    2>&1 | grep -v "^WARNING: Location" || true
ls "$ctx"/dist/faasrl-*.whl >/dev/null
cp -r functions "$ctx/functions"
find "$ctx/functions" -name __pycache__ -prune -exec rm -rf {} +

DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build --quiet --build-arg "BASE_IMAGE=$base" \
    --label "faasrl.python=$pyver" -f "$dockerfile" -t "faasrl/$image:$tag" "$ctx" >/dev/null
size=$(docker image inspect "faasrl/$image:$tag" --format '{{.Size}}')
echo "built faasrl/$image:$tag ($((size / 1000000)) MB, Python $pyver, from $base)"
