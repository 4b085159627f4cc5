"""Tests of the MovieLens loaders on tiny made-up files in each format."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from botorch_pref.data import load_movielens

# (user, item, rating, timestamp): made up, not MovieLens data.
ROWS = [
    (10, 300, 4.0, 881250949),
    (7, 300, 2.0, 891717742),
    (10, 12, 5.0, 878887116),
    (3, 55, 1.0, 880606923),
    (7, 12, 3.5, 886397596),
]


def write(path: Path, kind: str) -> Path:
    if kind == "u.data":
        lines = [f"{u}\t{i}\t{int(r)}\t{t}" for u, i, r, t in ROWS]
    elif kind == "ratings.dat":
        lines = [f"{u}::{i}::{int(r)}::{t}" for u, i, r, t in ROWS]
    elif kind == "ratings.csv":
        lines = ["userId,movieId,rating,timestamp"] + [f"{u},{i},{r},{t}" for u, i, r, t in ROWS]
    else:
        lines = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
        lines += [f"{u}\t{i}\t{int(r)}\t{t}" for u, i, r, t in ROWS]
    target = path / kind
    target.write_text("\n".join(lines) + "\n")
    return target


@pytest.mark.parametrize("kind", ["u.data", "ratings.dat", "ratings.csv", "tiny.inter"])
def test_each_format(tmp_path, kind):
    data = load_movielens(write(tmp_path, kind))
    assert len(data) == 5
    assert data.user_ids == [3, 7, 10] and data.item_ids == [12, 55, 300]
    assert data.users.tolist() == [2, 1, 2, 0, 1]
    assert data.items.tolist() == [2, 2, 0, 1, 0]
    want = [r for *_, r, _ in ROWS]
    if kind in ("u.data", "ratings.dat", "tiny.inter"):
        want = [float(int(r)) for r in want]
    assert data.ratings.tolist() == want
    assert data.timestamps.tolist() == [t for *_, t in ROWS]
    assert data.pairs.dtype == torch.long and data.pairs.shape == (5, 2)
    assert data.user_index[10] == 2 and data.item_index[55] == 1
    assert (data.n_users, data.n_items) == (3, 3)


def test_directory_and_min_rating(tmp_path):
    write(tmp_path, "ratings.dat")
    data = load_movielens(tmp_path, min_rating=3)
    assert len(data) == 3 and data.ratings.min().item() >= 3
    assert data.user_ids == [7, 10]


def test_inter_with_string_tokens_and_extra_columns(tmp_path):
    path = tmp_path / "x.inter"
    path.write_text(
        "item_id:token\tuser_id:token\tlabel:float\nm1\tu_b\t1\nm2\tu_a\t1\nm1\tu_a\t1\n"
    )
    data = load_movielens(path)
    assert data.user_ids == ["u_a", "u_b"] and data.item_ids == ["m1", "m2"]
    assert data.pairs.tolist() == [[1, 0], [0, 1], [0, 0]]
    assert data.timestamps is None and torch.isnan(data.ratings).all()


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_movielens(tmp_path / "nope.dat")
    with pytest.raises(FileNotFoundError, match="holds none of"):
        load_movielens(tmp_path)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("ratings.csv", "user,movie\n1,2\n", "needs userId and movieId"),
        ("u.data", "1\t2\t3\t4\n5\t6\n", "malformed"),
        ("empty.inter", "", "empty"),
        ("notes.txt", "hello world\n", "unknown ratings format"),
    ],
)
def test_malformed_files(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_movielens(path)


def test_no_interaction_above_the_threshold(tmp_path):
    write(tmp_path, "ratings.dat")
    with pytest.raises(ValueError, match="no interaction is rated at least 9"):
        load_movielens(tmp_path / "ratings.dat", min_rating=9)


@pytest.mark.skipif(importlib.util.find_spec("recbole") is None, reason="recbole not installed")
def test_real_ml100k_from_the_recbole_wheel():
    spec = importlib.util.find_spec("recbole")
    path = Path(spec.origin).parent / "dataset_example" / "ml-100k" / "ml-100k.inter"
    data = load_movielens(path)
    assert (len(data), data.n_users, data.n_items) == (100000, 943, 1682)


def test_ids_are_integers_only_when_written_plainly(tmp_path):
    # RecBole tokens are strings: "007" and "7" are two users, and "0042" keeps its zeros.
    path = tmp_path / "lead.inter"
    path.write_text("user_id:token\titem_id:token\n007\t10\n7\t11\n0042\t12\n-3\t10\n")
    data = load_movielens(path)
    assert data.user_ids == ["-3", "0042", "007", "7"] and data.item_ids == [10, 11, 12]
    assert data.users.tolist() == [2, 3, 1, 0]
    # Negative integers written plainly stay integers.
    plain = tmp_path / "plain.inter"
    plain.write_text("user_id:token\titem_id:token\n-3\t10\n7\t11\n")
    assert load_movielens(plain).user_ids == [-3, 7]
    # Numeric ids beyond int64 stay strings instead of overflowing.
    big = tmp_path / "big.inter"
    big.write_text("user_id:token\titem_id:token\n12345678901234567890\t10\n2\t11\n")
    assert load_movielens(big).user_ids == ["12345678901234567890", "2"]


def test_a_byte_order_mark_before_the_header_is_ignored(tmp_path):
    plain = write(tmp_path, "ratings.csv")
    marked = tmp_path / "marked" / "ratings.csv"
    marked.parent.mkdir()
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert load_movielens(marked).pairs.tolist() == load_movielens(plain).pairs.tolist()
