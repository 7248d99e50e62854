#!/usr/bin/env bash
# Build one faasrl image: runtime, runtime-gpu or platform.
#
#   images/build.sh runtime             # BASE_IMAGE=faasrl/base:bookworm unless set
#   BASE_IMAGE=python:3.11-slim images/build.sh platform    # where a registry is reachable
#
# Steps, each skipped when its inputs did not change: the base image (images/base/ when
# BASE_IMAGE is a faasrl/base tag), the wheelhouse for the base's Python (images/wheelhouse.py),
# and the build context build/images/<image>/: the paths of the repository the Dockerfile reads
# (requirements, constraints, pyproject.toml, platform/faasrl, functions) beside wheelhouse/.
# Then `docker build`, unless the image was built from the same inputs. Unchanged inputs give
# the same image id: the legacy builder's cache key of a COPY is its files' content and mode
# (not their mtimes), faasrl's wheel is built inside the image from the source with a fixed
# SOURCE_DATE_EPOCH, and every later step is cached, so `docker compose up` leaves running
# containers alone.
set -euo pipefail
cd "$(dirname "$0")/.."

image=${1:?usage: images/build.sh runtime|runtime-gpu|platform}
base=${BASE_IMAGE:-faasrl/base:bookworm}
tag=${IMAGE_TAG:-latest}
python=${PYTHON:-.venv/bin/python}
args=()
case $image in
    runtime|platform) dockerfile=images/$image/Dockerfile ;;
    runtime-gpu)
        dockerfile=images/runtime/Dockerfile
        args+=(--build-arg REQUIREMENTS=images/runtime-gpu/requirements.txt
               --build-arg PIP_EXTRA_INDEX_URL=)
        ;;
    *) echo "unknown image $image (runtime, runtime-gpu, platform)" >&2; exit 2 ;;
esac
ctx=build/images/$image
mkdir -p "$ctx"

if [[ $base == faasrl/base:* ]]; then
    images/base/build.sh "$base"
elif ! docker image inspect "$base" >/dev/null 2>&1; then
    docker pull "$base"
fi
# The base's Python: its faasrl.python label (images/base/ sets one), else asked of it.
pyver=$(docker image inspect "$base" --format '{{index .Config.Labels "faasrl.python"}}')
if [[ -z $pyver || $pyver == "<no value>" ]]; then
    pyver=$(docker run --rm --network none "$base" python3 -c \
        'import platform; print(platform.python_version())')
fi

# The wheelhouse, resolved for the base image's Python, with what builds faasrl's wheel.
build_system=$("$python" -c \
    'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["build-system"])')
stamp=$( (cat "images/$image/requirements.txt" constraints.txt images/wheelhouse.py
          echo "$build_system") | sha256sum | cut -c1-16)-$pyver
rm -rf "$ctx/wheels" "$ctx/wheels.stamp" "$ctx/dist" "$ctx/requirements.txt"  # older layout
if [[ "$(cat "$ctx/wheelhouse.stamp" 2>/dev/null)" != "$stamp" ]]; then
    rm -rf "$ctx/wheelhouse"
    "$python" images/wheelhouse.py --requirements "images/$image/requirements.txt" \
        --constraints constraints.txt --pyproject pyproject.toml --python "$pyver" \
        --dest "$ctx/wheelhouse"
    echo "$stamp" > "$ctx/wheelhouse.stamp"
fi

# The repository's paths the Dockerfile reads, fresh (no stale module survives), without
# bytecode or egg-info.
rm -rf "$ctx/images" "$ctx/platform" "$ctx/functions"
mkdir -p "$ctx/images/$image" "$ctx/platform"
cp "images/$image/requirements.txt" "$ctx/images/$image/requirements.txt"
cp constraints.txt pyproject.toml "$ctx/"
cp -r platform/faasrl "$ctx/platform/faasrl"
cp -r functions "$ctx/functions"
find "$ctx/platform" "$ctx/functions" \( -name __pycache__ -o -name '*.egg-info' \) -prune \
    -exec rm -rf {} +

# A sum of everything the image is made of (the base image's id, the Dockerfile, its build
# arguments, the wheelhouse's stamp, the paths and modes and contents of the context's other
# files). An image labelled with the same sum is not built again: Docker's cache would give
# it back unchanged, but only after receiving the whole context (the runtime's wheelhouse is
# 300 MB: seconds).
inputs=$( (docker image inspect "$base" --format '{{.Id}}'
           echo "${args[*]}"
           cat "$dockerfile" "$ctx/wheelhouse.stamp"
           cd "$ctx" && find images platform functions constraints.txt pyproject.toml \
               -type f -printf '%p %m\n' | LC_ALL=C sort
           find images platform functions constraints.txt pyproject.toml -type f -print0 \
               | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16)
before=$(docker image inspect "faasrl/$image:$tag" \
    --format '{{.Id}} {{index .Config.Labels "faasrl.inputs"}}' 2>/dev/null || true)
if [[ ${before#* } != "$inputs" ]]; then
    DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build --quiet --build-arg "BASE_IMAGE=$base" \
        "${args[@]}" --label "faasrl.python=$pyver" --label "faasrl.inputs=$inputs" \
        -f "$dockerfile" -t "faasrl/$image:$tag" "$ctx" >/dev/null
fi
before=${before%% *}
after=$(docker image inspect "faasrl/$image:$tag" --format '{{.Id}} {{.Size}}')
id=${after% *} size=${after#* }
if [[ $id == "$before" ]]; then
    echo "faasrl/$image:$tag unchanged (${id:7:12}, $((size / 1000000)) MB)"
else
    echo "built faasrl/$image:$tag (${id:7:12}, $((size / 1000000)) MB, Python $pyver, from $base)"
fi
