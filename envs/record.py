"""Record an episode of a policy as a video: MP4 through Gymnasium's ``RecordVideo`` (moviepy,
the ``video`` extra) or a GIF (Pillow, with matplotlib), headless.

    python envs/record.py --policy classical --out runs/video/classical.mp4
    python envs/record.py --policy runs/diff/model.pt --out docs/trained.gif --seed 3 --max-steps 400
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import torch

from dyn4_gym import cli


def _episode(env, policy, seed: int, max_steps: int):
    obs, _ = env.reset(seed=seed)
    total, steps, info = 0.0, 0, {}
    for steps in range(1, max_steps + 1):
        with torch.no_grad():
            action = policy(torch.as_tensor(obs, dtype=torch.float32)[None])[0].double().numpy()
        obs, r, term, trunc, info = env.step(action.astype(np.float32))
        total += r
        if term or trunc:
            break
    return total, steps, info


def record(policy, env_kwargs: dict, out: str, seed: int = 0, max_steps: int = 800, fps: int | None = None,
           every: int = 1, scale: float = 1.0, env_id: str | None = None):
    """Write one episode of ``policy`` on ``env_id`` (``Dyn4Humvee-v1`` if None) with ``env_kwargs``
    over it to ``out`` (.mp4 or .gif); returns ``(return, steps, info)``. A GIF keeps every ``every``-th frame, scaled by
    ``scale`` (smaller files for docs)."""
    import gymnasium as gym

    import dyn4_gym  # noqa: F401

    out = os.path.abspath(out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    env = gym.make(env_id or "Dyn4Humvee-v1", render_mode="rgb_array", **env_kwargs)
    fps = fps or env.metadata["render_fps"]
    if out.endswith(".mp4"):
        from gymnasium.wrappers import RecordVideo

        env.unwrapped.metadata = dict(env.unwrapped.metadata, render_fps=fps)  # this env's, not the class's
        with tempfile.TemporaryDirectory(prefix="dyn4_video_") as tmp:
            folder = os.path.join(tmp, "video")
            env = RecordVideo(env, folder, episode_trigger=lambda i: True, name_prefix="episode", disable_logger=True)
            result = _episode(env, policy, seed, max_steps)
            env.close()
            files = sorted(f for f in os.listdir(folder) if f.endswith(".mp4"))
            os.replace(os.path.join(folder, files[0]), out)
    elif out.endswith(".gif"):
        from gymnasium.wrappers import RenderCollection
        from PIL import Image

        env = RenderCollection(env)
        result = _episode(env, policy, seed, max_steps)
        frames = [Image.fromarray(f) for f in env.render()[::every]]
        if scale != 1.0:
            frames = [f.resize((int(f.width * scale), int(f.height * scale)), Image.LANCZOS) for f in frames]
        frames[0].save(out, save_all=True, append_images=frames[1:], duration=int(1000 * every / fps), loop=0,
                       optimize=True)
        env.close()
    else:
        raise ValueError(f"--out must end in .mp4 or .gif, got {out!r}")
    return result


def parse_args(argv=None):
    ap = cli.Parser(description=__doc__.split("\n\n")[0])
    ap.add_policy()
    ap.add_output("--out", "runs/video/episode.mp4", kind="file", help="the video: .mp4 or .gif")
    ap.add_argument("--seed", type=cli.seed, default=0)
    ap.add_argument("--max-steps", type=cli.int_in(1, 10**6), default=800)
    ap.add_argument("--fps", type=cli.int_in(1, 1000), default=None, help="frames per second (default: the env's 20)")
    ap.add_argument("--every", type=cli.int_in(1, 10**6), default=1, help="GIF: keep every n-th frame")
    ap.add_argument("--scale", type=cli.float_in(0.01, 10.0), default=1.0, help="GIF: scale the frames (0.5: half size)")
    ap.add_env_id(help="the task to drive, as registered (--env-kwargs over it; default: the one the model was "
                       "trained on where its files say)")
    ap.add_env_kwargs()
    args = ap.parse_args(argv)
    if not args.out.endswith((".mp4", ".gif")):
        ap.fail("--out", f"must end in .mp4 or .gif, got {args.out!r}")
    return args


@cli.script
def main(argv=None):
    args = parse_args(argv)
    from dyn4_gym.agents.loading import load_fitting_policy

    policy, name, env_kwargs = load_fitting_policy(args.policy, args.env_kwargs, env_id=args.env_id)
    # the id named, so its version (and Gymnasium's note on an out-of-date one) is the task's
    ret, steps, info = record(policy, env_kwargs, args.out, args.seed, args.max_steps, args.fps, args.every, args.scale,
                              env_id=args.env_id)
    print(f"{name}, seed {args.seed}: return {ret:.1f} over {steps} steps "
          f"({'finished the course' if info.get('success') else 'did not finish'}) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
