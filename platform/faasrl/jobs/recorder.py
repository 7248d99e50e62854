"""The process that records a job's videos: ``python -m faasrl.jobs.recorder`` reads a
:class:`~faasrl.jobs.videos.Recording` (JSON) on stdin, plays its episodes with the model
version's deterministic action (the same act as the job's evaluation) and writes one mp4 and
its JSON sidecar per episode. It prints JSON lines: ``{"frames": n}`` as frames are written,
then ``{"videos": [...]}`` or ``{"unavailable": why}``. A process of its own keeps torch and
the env out of the gateway."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from faasrl.algorithms import ALGORITHMS
from faasrl.data.codec import decode_tensors
from faasrl.jobs.videos import Recording, VideoFile, sidecar, video_path
from faasrl.rl.env_loader import install
from faasrl.rl.policy import PolicySpec
from faasrl.rl.rollout import acting
from faasrl.rl.video import NoVideo, record_episode


def _say(line: dict[str, Any]) -> None:
    print(json.dumps(line), flush=True)


def _acting(req: Recording) -> Any:
    module = ALGORITHMS[req.algorithm]
    cfg = module.Config.model_validate(req.hyperparameters)
    spec = PolicySpec.from_dict(req.policy)
    model = module.make_model(spec, cfg)
    weights, _ = decode_tensors(req.model_path.read_bytes())
    model.load_state_dict(weights)
    model.eval()
    return acting(module, model, cfg)


def main() -> None:
    req = Recording.model_validate_json(sys.stdin.read())
    if req.env is not None and req.env_archive is not None:
        install(req.env_archive.read_bytes(), req.env.code_sha256)
    policy = _acting(req)
    req.folder.mkdir(parents=True, exist_ok=True)
    made = []
    try:
        for i in range(req.episodes):
            n, seed = req.first_index + i, req.seed + i
            video = record_episode(policy, req.env_id, req.env, seed=seed,
                                   path=video_path(req.folder, n),
                                   progress=lambda f: _say({"frames": f}) if f % 25 == 0 else None)
            shown = VideoFile(n=n, version=req.version, seed=seed, source=req.source,
                              **asdict(video))
            sidecar(req.folder, n).write_text(shown.model_dump_json())
            made.append(shown.model_dump(mode="json"))
    except NoVideo as exc:
        _say({"unavailable": str(exc)})
        return
    _say({"videos": made})


if __name__ == "__main__":
    main()
