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
    # the narrowest point's narrower side is the corridor (a car on the centre line is inside the
    # track everywhere); a half_width given beside the file wins; a plain line keeps the default
    tc = EnvConfig.from_dict({"course": {"file": tum}}).course
    assert tc.centre_line == given.course.centre_line and tc.length == given.course.length and tc.half_width == 2.5
    assert EnvConfig.from_dict({"course": {"file": tum, "half_width": 4.0}}).course.half_width == 4.0
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
    with pytest.raises(ConfigError, match="both file and centre_line"):
        EnvConfig.from_dict({"course": {"file": EXAMPLE_TRACK, "centre_line": LINE}})
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
