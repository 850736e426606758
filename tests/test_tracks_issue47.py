"""Tracks from files (issue 47, item 5): ``course={"file": path}`` reads the TUM race track
format or a plain centre line, on both engines, with clear errors for a bad file."""

import gymnasium as gym
import numpy as np
import pytest

import dyn4_gym  # noqa: F401
from dyn4_gym.agents.classical import PurePursuit
from dyn4_gym.agents.evaluation import evaluate
from dyn4_gym.envs import ConfigError, EnvConfig
from dyn4_gym.envs.tracks import EXAMPLE_TRACK, read_track

LINE = [(0.0, 0.0), (40.0, 0.0), (80.0, 5.0), (120.0, 15.0), (160.0, 20.0)]


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_both_formats_read_as_the_centre_line_they_hold(tmp_path):
    tum = _write(tmp_path, "t.csv", "# x_m,y_m,w_tr_right_m,w_tr_left_m\n"
                 + "".join(f"{x},{y},{2.5 + i * 0.1},{3.0}\n" for i, (x, y) in enumerate(LINE)))
    plain = _write(tmp_path, "p.csv", "x,y\n\n" + "".join(f"{x}, {y}\n" for x, y in LINE))
    xy, w = read_track(tum)
    assert np.array_equal(xy, np.array(LINE)) and w.shape == (5, 2) and w.min() == 2.5
    xy2, w2 = read_track(plain)
    assert np.array_equal(xy2, xy) and w2 is None
    given = EnvConfig.from_dict({"course": {"centre_line": LINE}})
    # the file's widths are the corridor's, point by point, and their least the cross-track's scale;
    # a half_width given beside the file makes the corridor that wide everywhere; a plain line
    # keeps the default
    tc = EnvConfig.from_dict({"course": {"file": tum}}).course
    assert tc.centre_line == given.course.centre_line and tc.length == given.course.length and tc.half_width == 2.5
    assert tc.widths == tuple((2.5 + i * 0.1, 3.0) for i in range(5))
    wide = EnvConfig.from_dict({"course": {"file": tum, "half_width": 4.0}}).course
    assert wide.half_width == 4.0 and wide.widths is None
    assert EnvConfig.from_dict({"course": {"file": plain}}).course == given.course


@pytest.mark.parametrize("text, match", [
    ("1,2\n3\n", "row 2: 1 columns"),
    ("1,2\n3,4,5\n", "row 2: 3 columns"),
    ("1,2,3,4\n5,6\n", "row 2: 2 columns after rows of 4"),
    ("x,y\n1,2\nfoo,3\n", "row 3: not numbers"),
    ("1,2\nnan,3\n", "row 2: a value is not finite"),
    ("1,2,3,-1\n4,5,3,3\n", "row 1: a width is negative"),
    ("# only a comment\n1,2\n", "holds 1 point"),
])
def test_a_bad_file_is_an_error_naming_its_row(tmp_path, text, match):
    path = _write(tmp_path, "bad.csv", text)
    with pytest.raises(ConfigError, match=match):
        EnvConfig.from_dict({"course": {"file": path}})


def test_a_missing_file_or_both_sources_are_errors(tmp_path):
    with pytest.raises(ConfigError, match="No such file"):
        EnvConfig.from_dict({"course": {"file": str(tmp_path / "none.csv")}})
    with pytest.raises(ConfigError, match="file beside centre_line or widths"):
        EnvConfig.from_dict({"course": {"file": EXAMPLE_TRACK, "centre_line": LINE}})
    with pytest.raises(ConfigError, match="file beside centre_line or widths"):
        EnvConfig.from_dict({"course": {"file": EXAMPLE_TRACK, "widths": [(3.0, 3.0)] * 5}})
    with pytest.raises(ConfigError, match="must be a path"):
        EnvConfig.from_dict({"course": {"file": 3}})
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ConfigError, match="not a text file"):
        EnvConfig.from_dict({"course": {"file": str(tmp_path / "bin.csv")}})


@pytest.mark.parametrize("engine", ["numba", "torch"])
def test_the_example_track_is_driven_to_its_end_on_both_engines(engine):
    """The bundled example track (dyn4_gym/data/tracks/, made here): gym.make takes it, and the
    classical controller drives the 495 m lap to its end inside the 3 m corridor."""
    kw = {"course": {"file": EXAMPLE_TRACK}, "episode_steps": 1200, "engine": engine}
    env = gym.make("Dyn4Humvee-v2", **kw)
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.config.course.half_width == 3.0 and env.unwrapped.config.course.length == 495.0
    env.close()
    ev = evaluate(PurePursuit.for_env(kw), kw, seeds=(0,))
    assert ev.finished == 1.0 and 45.0 < ev.arrival[0] < 60.0 and ev.cross_track_rms < 0.5


# a straight 300 m track whose corridor is 2 m wide on the right and 5 m on the left, then
# narrows to 2.5 m both sides over its second half (per-point widths, issue 47 item 5)
STRAIGHT = [(0.0, 0.0), (150.0, 0.0), (300.0, 0.0)]
WIDTHS = [(2.0, 5.0), (2.0, 5.0), (2.5, 2.5)]


def _straight(tmp_path):
    return _write(tmp_path, "w.csv", "# x_m,y_m,w_tr_right_m,w_tr_left_m\n"
                  + "".join(f"{x},{y},{r},{l}\n" for (x, y), (r, l) in zip(STRAIGHT, WIDTHS)))


def test_widths_are_resampled_along_the_line(tmp_path):
    from dyn4_gym.envs.course import course_widths

    c = EnvConfig.from_dict({"course": {"file": _straight(tmp_path), "spacing": 1.0}}).course
    w = course_widths(c)
    assert c.half_width == 2.0 and w.shape == (301, 2)
    assert np.allclose(w[:151], (2.0, 5.0)) and np.allclose(w[225], (2.25, 3.75)) and np.allclose(w[-1], (2.5, 2.5))
    # the edges the renderer draws and the range finders meet: 5 m left and 2 m right at the start
    from dyn4_gym.envs.course import centre_line_course, corridor_edges

    xy, th = centre_line_course(c.centre_line, c.spacing)
    left, right = corridor_edges(xy, th, w)
    assert np.allclose(left[0], (0.0, 5.0)) and np.allclose(right[0], (0.0, -2.0)) and np.allclose(right[-1, 1], -2.5)
    # a drawn course: half_width both sides everywhere
    d = EnvConfig().course
    assert np.array_equal(course_widths(d), np.full((301, 2), 3.0))


@pytest.mark.parametrize("engine", ["numba", "torch"])
@pytest.mark.parametrize("steer, side, edge", [(0.15, "left", 5.0), (-0.15, "right", 2.0)])
def test_the_corridor_ends_at_each_sides_own_width(tmp_path, engine, steer, side, edge):
    """Steering off the centre line on the wide first half: the episode ends out of the corridor
    as the car passes that side's own width (5 m left, 2 m right), not the narrowest."""
    env = gym.make("Dyn4Humvee-v2", engine=engine, dtype="float64", course={"file": _straight(tmp_path)},
                   ground=dyn4_gym.FLAT_GROUND, start_s=10.0)
    env.reset(seed=0)
    for step in range(400):
        _, _, te, tr, info = env.step(np.array([steer, 0.0], np.float32))
        if te or tr:
            break
    assert te and info["out_of_corridor"], (step, info)
    e = info["cross_track"]
    assert (e > edge if side == "left" else -e > edge) and abs(e) < edge + 0.5, e
    assert info["s"] < 150.0  # still on the wide half


def test_both_engines_drive_a_varying_corridor_alike(tmp_path, drive_engines):
    """Random driving with resets on a corridor that narrows and widens, range finders on: the
    episodes end at the same steps and every observation entry agrees to float32 rounding."""
    xs = np.linspace(0.0, 400.0, 81)
    line = np.stack((xs, 20.0 * np.sin(xs / 40.0)), -1)
    path = _write(tmp_path, "v.csv", "".join(f"{x},{y},{2.0 + 1.5 * np.sin(x / 25.0) ** 2},"
                                              f"{2.0 + 1.5 * np.cos(x / 30.0) ** 2}\n" for x, y in line))
    (a, ea), (b, eb) = drive_engines(dict(course={"file": path}, sensors={"beams": 7}), seed=1, scale=0.5)
    assert ea.sum() >= 8 and np.array_equal(ea, eb)
    assert np.max(np.abs(a - b) / np.maximum(np.abs(b), 1.0)) < 2e-7


def test_the_racing_line_plans_inside_each_sides_width(tmp_path):
    """The race baseline's line keeps within the room each side of each point (less its safety),
    and uses the wide side where the corridor gives it."""
    import torch

    from dyn4_gym.agents.race import RacingLine, RacingLineParams
    from dyn4_gym.agents.racing_line import min_curvature_offsets, normals
    from dyn4_gym.envs.core import TaskCore

    xs = np.linspace(0.0, 300.0, 61)
    line = np.stack((xs, 15.0 * np.sin(xs / 30.0)), -1)
    widths = np.stack((1.0 + 0.0 * xs, 4.0 + 0.0 * xs), -1)  # 1 m right, 4 m left
    core = TaskCore(EnvConfig.from_dict({"course": {"centre_line": line.tolist(), "widths": widths.tolist(),
                                                    "half_width": 1.0}}))
    st = core.new_state(torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long))
    drv = RacingLine(core, RacingLineParams(safety=0.5))
    drv.plan(st)
    xy, th = st.course_xy[0].double().numpy(), st.course_heading[0].double().numpy()
    n = ((drv.line[0] - xy) * normals(th)).sum(-1)
    symmetric = min_curvature_offsets(xy, th, 0.5)  # a scalar bound is both sides' (unchanged)
    assert np.abs(symmetric).max() <= 0.5 + 1e-9
    assert n.min() >= -0.5 - 1e-6 and n.max() <= 3.5 + 1e-6 and n.max() > symmetric.max() + 0.05
    with pytest.raises(ValueError, match="narrowest side"):
        RacingLine(core, RacingLineParams(safety=1.5))


@pytest.mark.parametrize("widths, match", [
    ([(3.0, 3.0)] * 4, "one \\(right, left\\) pair"),
    ([(3.0, 3.0)] * 4 + [(3.0, "a")], "one \\(right, left\\) pair"),
    ([(3.0, 3.0)] * 4 + [(0.2, 3.0)], "in \\[0.5, 1000\\]"),
    ([(3.0, 3.0)] * 4 + [(float("nan"), 3.0)], "in \\[0.5, 1000\\]"),
    ([(3.0, 3.0)] * 4 + [(2.0, 3.0)], "under half_width"),
])
def test_bad_widths_are_refused(widths, match):
    with pytest.raises(ConfigError, match=match):
        EnvConfig.from_dict({"course": {"centre_line": LINE, "widths": widths}})
    with pytest.raises(ConfigError, match="needs a centre_line"):
        EnvConfig.from_dict({"course": {"widths": [(3.0, 3.0)] * 5}})
