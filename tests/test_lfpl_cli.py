"""End-to-end runs of ``botorch-pref lfpl`` on tiny data."""

from __future__ import annotations

import torch

from botorch_pref.cli import main


def _ratings_file(tmp_path):
    """A MovieLens ``u.data`` file: 30 users, 6 of 40 items each, rating 4, increasing times."""
    gen = torch.Generator().manual_seed(0)
    lines = []
    for user in range(30):
        for item in torch.randperm(40, generator=gen)[:6].tolist():
            lines.append(f"{user + 1}\t{item + 1}\t4\t{880000000 + len(lines)}")
    path = tmp_path / "u.data"
    path.write_text("\n".join(lines) + "\n")
    return path


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
    path = _ratings_file(tmp_path)
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


def test_train_recommend_evaluate(tmp_path, capsys):
    from botorch_pref.lfpl.recommender import LFPLRecommender

    data, model = _ratings_file(tmp_path), tmp_path / "model.pt"
    common = ["--dim", "4", "--epochs", "3", "--batch-size", "64", "--threads", "1"]
    code = main(["lfpl", "train", "--data", str(data), "--out", str(model), *common,
                 "--holdout", "random", "--seed", "3"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "150 training interactions, 30 users, 40 items; 3 epochs" in out
    rec = LFPLRecommender.load(model)
    assert rec.info["holdout"] == {"by": "random", "seed": 3} and rec.params["dim"] == 4
    assert main(["lfpl", "recommend", "--model", str(model), "--users", "7", "2", "--k", "3"]) == 0
    out = capsys.readouterr().out
    expected = rec.recommend([7, 2], k=3)
    for user, items in zip(expected.users, expected.items, strict=True):
        for rank, item in enumerate(items):
            assert f"| {user} | {rank + 1} | {item} |" in out
    assert main(["lfpl", "evaluate", "--model", str(model), "--data", str(data)]) == 0
    out = capsys.readouterr().out
    assert "leave-one-out (random, seed 3) for 30 users" in out and "| LFPL/IF (K=4) |" in out


def test_evaluate_refuses_a_model_without_holdout_or_other_data(tmp_path, capsys):
    data, model = _ratings_file(tmp_path), tmp_path / "model.pt"
    main(["lfpl", "train", "--data", str(data), "--out", str(model), "--epochs", "1"])
    capsys.readouterr()
    assert main(["lfpl", "evaluate", "--model", str(model), "--data", str(data)]) == 2
    assert "was trained on all interactions" in capsys.readouterr().err
    assert main(["lfpl", "recommend", "--model", str(model), "--users", "x"]) == 2
    assert "user id 'x' is not an integer" in capsys.readouterr().err
    assert main(["lfpl", "recommend", "--model", str(model), "--users", "99"]) == 2
    assert "unknown user id(s) [99]" in capsys.readouterr().err
