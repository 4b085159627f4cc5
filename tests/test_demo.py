"""Tests for the ``botorch-pref demo`` command (botorch_pref.demo)."""

from __future__ import annotations

import math

import pytest

from botorch_pref.cli import main
from botorch_pref.demo import run_demo
from botorch_pref.test_functions import get_utility

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_demo_cli_end_to_end(tmp_path, capsys):
    out = tmp_path / "figs" / "demo.png"
    args = ["demo", "--queries", "3", "--initial", "2", "--seed", "1", "--output", str(out)]
    assert main([*args, "--no-progress"]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("branin (d=2), eubo, gumbel user at 20% error")
    assert lines[1].split() == ["query", "regret", "log10", "seconds"]
    rows = [line.split() for line in lines[2:7]]
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4, 5]
    for r in rows:
        regret, log10 = float(r[1]), float(r[2])
        assert regret >= 0 and log10 == pytest.approx(math.log10(regret), abs=2e-3)
        assert float(r[3]) >= 0
    assert "(end of random queries)" in lines[3]
    assert lines[7].startswith("recommended design (")
    assert lines[8] == f"figure written to {out}"


def test_demo_shows_no_progress_bar_when_stderr_is_not_a_terminal(capsys):
    """Piped or logged, the bar's frames would interleave with the table's rows."""
    assert main(["demo", "--queries", "1", "--initial", "2", "--no-plot"]) == 0
    captured = capsys.readouterr()
    assert "queries:" not in captured.err
    rows = captured.out.splitlines()[2:5]
    assert [int(r.split()[0]) for r in rows] == [1, 2, 3]


def test_run_demo_one_dimensional_with_plot(tmp_path):
    out = tmp_path / "two-bump.png"
    result = run_demo(
        problem="two-bump",
        strategy="champion-challenger",
        queries=2,
        n_initial=2,
        seed=0,
        output=out,
        progress=False,
    )
    assert result.problem == "two-bump" and result.scale > 0
    assert len(result.regrets) == len(result.seconds) == 4
    assert all(r >= 0 for r in result.regrets)
    assert result.figure == out and out.read_bytes()[:8] == PNG_MAGIC
    opt = result.optimizer
    assert opt.n_queries == 4 and opt.comparisons.shape[0] == 4
    assert opt.datapoints.shape[0] <= 2 * 2 + 2  # champion-challenger reuses the champion
    assert result.best is not None and result.final_regret == result.regrets[-1]
    utility = get_utility("two-bump")
    assert result.final_regret == pytest.approx(float(utility.regret(result.best.x)))


def test_demo_no_plot_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(
        ["demo", "--queries", "0", "--initial", "2", "--strategy", "random", "--no-plot",
         "--no-progress"]
    )  # fmt: skip
    assert code == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--problem", "nope"], "Unknown utility"),
        (["--error-rate", "0.7"], "error_rate"),
        (["--queries", "-1"], "queries"),
        (["--device", "warp9"], "device"),
    ],
)
def test_demo_bad_options_are_clean_errors(args, message, capsys, tmp_path):
    code = main(["demo", *args, "--no-plot", "--no-progress", "--output", str(tmp_path / "x.png")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("botorch-pref: error:") and message in err
    assert not (tmp_path / "x.png").exists()


def test_entry_threads_default_and_restore(monkeypatch):
    import torch

    from botorch_pref.runtime import default_threads, entry_threads

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    assert default_threads() == 1 and default_threads("cuda") is None
    before = torch.get_num_threads()
    with entry_threads("auto") as n:
        assert n == 1 == torch.get_num_threads()
    assert torch.get_num_threads() == before
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    assert default_threads() is None  # the user's choice stands
    with entry_threads("auto") as n:
        assert n == before == torch.get_num_threads()
    with pytest.raises(ValueError, match="at least 1"):
        with entry_threads(0):
            pass
    with pytest.raises(TypeError, match="threads"):
        with entry_threads(True):
            pass


def test_ctrl_c_is_one_line_and_status_130(capsys, monkeypatch):
    """Interrupting a command prints no traceback and exits as the shell expects."""

    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("botorch_pref.demo.run_demo", interrupted)
    assert main(["demo", "--no-plot"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "botorch-pref: interrupted" and "Traceback" not in err
