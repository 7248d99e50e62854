#!/usr/bin/env bash
# Pong PPO against Stable-Baselines3 with both updates on the GPU, same machine, in one call
# (bench/atari_peers.py --gpu): faasrl's learner with gpu: 1, SB3's model on cuda, each for
# WALL_S seconds a seed, then the held-out evaluation. On a machine with an NVIDIA GPU, its own
# Python with torch (CUDA) and no registry; bench/gpu_wheels.txt's packages in WHEELS.
#
#   OUT=/some/folder [WHEELS=/folder/of/wheels] [SEEDS="1"] [WALL_S=180] bash bench/gpu_pong.sh
set -uo pipefail

SEEDS=${SEEDS:-1}
WALL_S=${WALL_S:-180}
LOG=gpu_pong.log
source "$(dirname "$0")/device_setup.sh"

echo "== bench/atari_peers.py --gpu, seeds $SEEDS, $WALL_S s a side"
# shellcheck disable=SC2086  # the seeds are a list
"$PYTHON" bench/atari_peers.py --gpu --seeds $SEEDS --max-wall-s "$WALL_S" \
    --out "$OUT/atari_peers_gpu.json"
status=$?
echo "== done: exit $status"
exit "$status"
