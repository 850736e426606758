"""The top-level envs/ scripts run headless: record (GIF and MP4), preview, play (a key script)."""

import numpy as np
import pytest


@pytest.fixture
def _script(load_script):
    return lambda name: load_script(f"envs/{name}.py")


@pytest.mark.parametrize("name", ["record", "preview", "play"])
def test_each_script_has_help(name, capsys, _script):
    with pytest.raises(SystemExit) as e:
        _script(name).main(["--help"])
    assert e.value.code == 0 and "usage" in capsys.readouterr().out


def test_record_writes_a_gif_and_an_mp4(tmp_path, _script):
    from PIL import Image

    rec = _script("record")
    gif = tmp_path / "ep.gif"
    assert rec.main(["--policy", "classical", "--out", str(gif), "--max-steps", "12"]) == 0
    with Image.open(gif) as im:
        assert im.n_frames == 13  # the reset frame and one per step
    small = tmp_path / "small.gif"
    assert rec.main(["--out", str(small), "--max-steps", "12", "--every", "3", "--scale", "0.5"]) == 0
    with Image.open(small) as im, Image.open(gif) as big:
        assert im.n_frames == 5 and im.width == big.width // 2
    pytest.importorskip("moviepy")
    mp4 = tmp_path / "ep.mp4"
    assert rec.main(["--out", str(mp4), "--max-steps", "8", "--seed", "2"]) == 0
    assert mp4.stat().st_size > 1000 and mp4.read_bytes()[4:8] == b"ftyp"


def test_record_refuses_bad_inputs(tmp_path, capsys, _script):
    rec = _script("record")
    with pytest.raises(SystemExit):
        rec.main(["--out", str(tmp_path / "x.avi")])
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit) as e:
        rec.main(["--policy", str(bad), "--out", str(tmp_path / "y.gif")])
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_preview_draws_the_course_and_reports_it(tmp_path, _script):
    pv = _script("preview")
    out = tmp_path / "p.png"
    figs = pv.preview({"ground": {"n_patches": 6}}, 3, str(out), n=60)
    assert out.stat().st_size > 10_000
    assert figs["length"] == 300.0 and 0 < figs["max_curvature"] <= 3.0 / 10.0**2 + 1e-9
    assert 0.4 - 1e-6 <= figs["mu_range"][0] < figs["mu_range"][1] <= 1.0 + 1e-6
    assert pv.main(["--seed", "1", "--out", str(tmp_path / "q.png"), "--env-kwargs", '{"course": {"length": 120}}']) == 0
    with pytest.raises(SystemExit) as e:
        pv.main(["--env-kwargs", '{"course": {"half_width": -1}}'])
    assert e.value.code == 2


def test_play_drives_from_a_key_script(tmp_path, _script):
    pl = _script("play")
    d = pl.Driver()
    d.held = {"a", "w"}
    acts = [d.action() for _ in range(6)]
    assert acts[0][0] == pytest.approx(0.25) and acts[-1][0] == 1.0 and all(a[1] == 1.0 for a in acts)
    d.held = set()
    assert d.action()[0] == pytest.approx(0.75)  # steer returns to centre at the same rate
    out = tmp_path / "last.png"
    res = pl.play({}, seed=0, keys="wwwwdddd....", out=str(out))
    assert res["steps"] == 12 and np.isfinite(res["ret"]) and out.stat().st_size > 10_000
    with pytest.raises(ValueError, match="--keys"):
        pl.play({}, keys="wx")
