"""Edges of ``botorch-pref lfpl`` and of data-parallel sharding: errors are one line, on time."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from botorch_pref.cli import main
from botorch_pref.lfpl import ImplicitFeedback
from botorch_pref.lfpl.distributed import shard_by_user

FAST = ["--dim", "2", "--epochs", "1", "--batch-size", "64", "--threads", "1", "--no-progress"]


def _ratings(tmp_path: Path) -> Path:
    """A small u.data file: 10 users, 3 interactions each, 12 items."""
    lines = [
        f"{user + 1}\t{(user + j) % 12 + 1}\t4\t{880000000 + 3 * user + j}"
        for user in range(10)
        for j in range(3)
    ]
    path = tmp_path / "u.data"
    path.write_text("\n".join(lines) + "\n")
    return path


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int, message: str) -> None:
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_train_refuses_an_out_path_that_is_a_directory(tmp_path, capsys):
    data, folder = _ratings(tmp_path), tmp_path / "models"
    folder.mkdir()
    code = main(["lfpl", "train", "--data", str(data), "--out", str(folder), *FAST])
    _one_line_error(capsys, code, f"--out {folder} is a directory")
    assert list(folder.iterdir()) == []


def test_train_reports_a_model_file_it_cannot_write(tmp_path, capsys, monkeypatch):
    from botorch_pref.lfpl.recommender import LFPLRecommender

    def refuse(self: LFPLRecommender, path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(LFPLRecommender, "save", refuse)
    out = tmp_path / "model.pt"
    code = main(["lfpl", "train", "--data", str(_ratings(tmp_path)), "--out", str(out), *FAST])
    _one_line_error(capsys, code, f"cannot write --out {out}: Permission denied")


def test_shard_by_user_refuses_on_every_rank_when_any_rank_would_be_empty():
    # Users 0 and 1 only: of 3 processes, process 2 gets nothing. Every process must refuse,
    # not only process 2 (processes 0 and 1 would wait for it in the first all-reduce).
    data = ImplicitFeedback(torch.tensor([[0, 0], [0, 1], [1, 2]]), 2, 3)
    for rank in range(3):
        with pytest.raises(ValueError, match="process 2 of 3 gets no interaction"):
            shard_by_user(data, rank, 3)
    shards = [shard_by_user(data, rank, 2) for rank in range(2)]
    assert [len(s) for s in shards] == [2, 1]


@pytest.mark.parametrize("command", ["train", "implicit", "synthetic"])
def test_every_command_refuses_a_negative_seed(tmp_path, capsys, command):
    """``train`` refused one deep in the recommender; ``implicit`` and ``synthetic`` ran."""
    args = ["lfpl", command, "--seed", "-1"]
    if command != "synthetic":
        args += ["--data", str(_ratings(tmp_path))]
    if command == "train":
        args += ["--out", str(tmp_path / "m.pt")]
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    assert "--seed: must be at least 0, got -1" in capsys.readouterr().err
