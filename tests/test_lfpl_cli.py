"""End-to-end runs of ``botorch-pref lfpl`` on tiny data."""

from __future__ import annotations

import torch

from botorch_pref.cli import main


def test_synthetic_command(capsys):
    code = main(
        [
            "lfpl", "synthetic", "--n-rankings", "60", "--length", "4", "--rows", "5",
            "--cols", "5", "--true-dim", "2", "--folds", "2", "--epochs", "5",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "| method | mean tau | true tau | ratio | skipped | seconds |" in out
    assert "| alternating |" in out and "| joint |" in out


def test_implicit_command(tmp_path, capsys):
    gen = torch.Generator().manual_seed(0)
    lines = []
    for user in range(30):
        for item in torch.randperm(40, generator=gen)[:6].tolist():
            lines.append(f"{user + 1}\t{item + 1}\t4\t{880000000 + len(lines)}")
    path = tmp_path / "u.data"
    path.write_text("\n".join(lines) + "\n")
    code = main(
        ["lfpl", "implicit", "--data", str(path), "--dim", "4", "--epochs", "3",
         "--batch-size", "64", "--holdout", "latest"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "180 interactions, 30 users, 40 items" in out
    for name in ("LFPL/IF (K=4)", "MostPopular", "Random"):
        assert f"| {name} |" in out
    assert "HR@10" in out and "NDCG@10" in out


def test_errors_are_reported_cleanly(tmp_path, capsys):
    code = main(["lfpl", "implicit", "--data", str(tmp_path / "missing.dat")])
    assert code == 2
    assert "no such file" in capsys.readouterr().err
    code = main(["lfpl", "synthetic", "--length", "1", "--folds", "2"])
    assert code == 2
    assert "length must lie in" in capsys.readouterr().err
    if not torch.cuda.is_available():
        code = main(["lfpl", "synthetic", "--device", "cuda"])
        assert code == 2
        assert "CUDA is not available" in capsys.readouterr().err
