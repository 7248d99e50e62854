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

FULL=${FULL:-1}
LOG=gpu_checks.log
source "$(dirname "$0")/device_setup.sh"

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
