#!/usr/bin/env bash
# The real-core runs docs/virtual-clock.md checks the virtual clock against, on a machine with
# 16 cores or more (a lent GPU machine: every learner has gpu: 0, so all run on its CPUs), in
# one call: Hopper-v5's Stellaris, IMPACT and synchronous PPO (8 actors, 4 learners, 30 rounds,
# gymnasium's envs), then CartPole-v1's (60 rounds) and Nitro against the fixed controller on
# CartPole-v1 (150 rounds, as the virtual-clock runs), each for its seeds (default 1 2 3). Each step writes its JSON to
# OUT as it ends, so a call cut short keeps the steps that finished; STEP_S bounds each one.
# Merge the parts with earlier seeds: bench/async_controllers.py --merge a.json b.json --out c.json.
#
#   OUT=/some/folder [WHEELS=/folder/of/wheels] [HOPPER_SEEDS="2 3"] [CARTPOLE_SEEDS=3] \
#       [NITRO_SEEDS="1 2 3"] [STEP_S=300] bash bench/real_cores.sh
set -uo pipefail

HOPPER_SEEDS=${HOPPER_SEEDS:-1 2 3}
CARTPOLE_SEEDS=${CARTPOLE_SEEDS:-1 2 3}
NITRO_SEEDS=${NITRO_SEEDS:-1 2 3}
STEP_S=${STEP_S:-300}
LOG=real_cores.log
source "$(dirname "$0")/device_setup.sh"

failed=0
step() {  # step NAME SCRIPT ARGS...: one bench run, its JSON to $OUT/NAME.json
    local name=$1 script=$2
    shift 2
    echo "== $name: $script $*"
    timeout "$STEP_S" "$PYTHON" "bench/$script" "$@" --out "$OUT/$name.json" || failed=$?
}
# shellcheck disable=SC2086  # the seeds are lists
step hopper async_controllers.py --envs Hopper-v5 --variants ppo-sync stellaris impact \
    --seeds $HOPPER_SEEDS --actors 8 --learners 4 --rounds 30 --env-backend gymnasium
# shellcheck disable=SC2086
step cartpole async_controllers.py --envs CartPole-v1 --variants ppo-sync stellaris impact \
    --seeds $CARTPOLE_SEEDS --actors 8 --learners 4
# shellcheck disable=SC2086
step nitro controllers.py --envs CartPole-v1 --controllers fixed nitro --seeds $NITRO_SEEDS \
    --job-episodes 0 --rounds 150 --no-plot
echo "== done: exit $failed"
exit "$failed"
