"""Drive the car yourself: arrow keys or WASD steer (left/right), drive (up) and brake (down);
the view follows the car, with the step's reward terms and energy books beside it. ``r``
restarts, ``q`` quits. Needs a screen (matplotlib's interactive backend).

    python envs/play.py [--seed 0] [--env-kwargs '{"target_speed": 8}']

Headless, ``--keys`` replays a script, one character per control step (``a``/``d`` steer,
``w`` drive, ``s`` brake, ``.`` coast), and ``--out`` saves the last screen:

    python envs/play.py --keys "wwwwwwddddd....aaaa" --out runs/play/last.png
"""

from __future__ import annotations

import os
import sys

import numpy as np

from dyn4_gym import cli

KEYS = {"left": "a", "right": "d", "up": "w", "down": "s", "a": "a", "d": "d", "w": "w", "s": "s", ".": "."}
STEER_RATE = 0.25  # steer command change per control step while a steer key is held (full lock in 0.2 s)


class Driver:
    """Keys held -> the env's action ``(steer, longitudinal)`` in ``[-1, 1]^2``."""

    def __init__(self):
        self.held: set[str] = set()
        self.steer = 0.0

    def action(self) -> np.ndarray:
        target = (1.0 if "a" in self.held else 0.0) - (1.0 if "d" in self.held else 0.0)
        self.steer += float(np.clip(target - self.steer, -STEER_RATE, STEER_RATE))
        lon = (1.0 if "w" in self.held else 0.0) - (1.0 if "s" in self.held else 0.0)
        return np.array([self.steer, lon], dtype=np.float32)


class Screen:
    """The env's top-down frame and the step's figures, in one matplotlib figure."""

    def __init__(self, interactive: bool):
        import matplotlib

        if not interactive:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self.plt = plt
        self.fig, (self.view, self.panel) = plt.subplots(1, 2, figsize=(10, 5), width_ratios=(1.2, 1))
        self.panel.axis("off")
        self.view.axis("off")
        self.image = None
        self.text = self.panel.text(0.0, 1.0, "", va="top", family="monospace", fontsize=8)

    def show(self, frame, reward, total, info, action):
        if self.image is None:
            self.image = self.view.imshow(frame)
        else:
            self.image.set_data(frame)
        lines = [f"action  steer {action[0]:+.2f}  drive {action[1]:+.2f}", f"reward  {reward:+8.3f}   return {total:9.2f}", "",
                 "reward terms (unweighted)"]
        lines += [f"  {k:12s} {v:+10.4f}" for k, v in info.get("reward_terms", {}).items()]
        lines += ["", "energy books [J] this step"]
        lines += [f"  {k:12s} {v:+12.1f}" for k, v in info.get("books", {}).items()]
        flags = [k for k in ("success", "out_of_corridor", "rollover", "nonfinite") if info.get(k)]
        lines += ["", "  ".join(flags) or "driving"]
        self.text.set_text("\n".join(lines))
        self.fig.canvas.draw_idle()

    def save(self, path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.fig.savefig(path, dpi=100)


def has_screen() -> bool:
    """Whether a window can open here: a display on Linux and the BSDs (macOS and Windows have one)."""
    if os.name == "posix" and sys.platform != "darwin":
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def play(env_kwargs: dict, seed: int = 0, keys: str | None = None, out: str | None = None) -> dict:
    """Drive one session; with ``keys`` headless (a script), else interactive. Returns figures."""
    import gymnasium as gym

    import dyn4_gym  # noqa: F401

    env = gym.make("Dyn4Humvee-v1", render_mode="rgb_array", **env_kwargs)
    driver, screen = Driver(), Screen(interactive=keys is None)
    state = {"obs": env.reset(seed=seed)[0], "total": 0.0, "steps": 0, "episodes": 1, "done": False}

    def tick():
        if state["done"]:
            return
        a = driver.action()
        _, r, term, trunc, info = env.step(a)
        state["total"] += r
        state["steps"] += 1
        state["done"] = term or trunc
        screen.show(env.render(), r, state["total"], info, a)

    if keys is not None:
        for ch in keys:
            if ch not in KEYS:
                raise ValueError(f"--keys takes a, d, w, s and '.', got {ch!r}")
            driver.held = {KEYS[ch]} - {"."}
            tick()
    else:  # pragma: no cover - needs a screen
        def press(event):
            if event.key == "q":
                screen.plt.close(screen.fig)
            elif event.key == "r":
                env.reset()
                state.update(total=0.0, done=False, episodes=state["episodes"] + 1)
            elif event.key in KEYS:
                driver.held.add(KEYS[event.key])

        screen.fig.canvas.mpl_connect("key_press_event", press)
        screen.fig.canvas.mpl_connect("key_release_event", lambda e: driver.held.discard(KEYS.get(e.key, "")))
        timer = screen.fig.canvas.new_timer(interval=int(1000 * env.unwrapped.config.control_dt))
        timer.add_callback(tick)
        timer.start()
        screen.plt.show()
    if out:
        screen.save(out)
    env.close()
    return dict(steps=state["steps"], ret=state["total"], done=state["done"])


def parse_args(argv=None):
    ap = cli.Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=cli.seed, default=0)
    ap.add_env_kwargs()
    ap.add_argument("--keys", default=None, help="headless: a key script, one character per control step")
    ap.add_output("--out", None, kind="file", help="save the last screen here (PNG)")
    args = ap.parse_args(argv)
    bad = sorted(set(args.keys or "") - set(KEYS))
    if bad:
        ap.fail("--keys", f"takes a, d, w, s and '.', got {bad[0]!r}")
    if args.keys is None and not has_screen():
        ap.error("no screen to play on (no display here): give --keys to drive headless")
    return args


@cli.script
def main(argv=None):
    args = parse_args(argv)
    res = play(args.env_kwargs, args.seed, args.keys, args.out)
    print(f"{res['steps']} steps, return {res['ret']:.2f}{' (episode over)' if res['done'] else ''}"
          + (f" -> {args.out}" if args.out else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
