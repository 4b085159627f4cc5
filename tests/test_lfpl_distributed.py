"""Data-parallel LFPL/IF with 2 CPU processes (gloo on 127.0.0.1), bounded in time."""

from __future__ import annotations

import socket

import pytest
import torch
import torch.multiprocessing as mp

from botorch_pref.lfpl import LFPL, evaluate, fit_implicit, leave_one_out
from botorch_pref.lfpl.distributed import shard_by_user
from botorch_pref.lfpl.simulation import power_law_interactions

SETTINGS = {"epochs": 25, "n_negatives": 3, "lr": 0.1, "reg": 0.01}


def _data():
    data, _ = power_law_interactions(300, 120, 9000, dim=4, scale=4.0, seed=1)
    return leave_one_out(data, seed=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from botorch_pref.lfpl.distributed import fit_data_parallel

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        split = _data()
        model = LFPL(split.train.n_users, split.train.n_items, 4, seed=0)
        fit = fit_data_parallel(model, split.train, batch_size=256, seed=0, **SETTINGS)
        torch.save(
            {"U": model.U.detach(), "V": model.V.detach(), "seen": model.seen_rows,
             "loss": torch.tensor(fit.train_loss)},
            f"{out}/rank{rank}.pt",
        )  # fmt: skip
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_agree_and_match_one_process(tmp_path):
    ctx = mp.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, 2, port, str(tmp_path))) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    for p in procs:
        if p.is_alive():
            p.kill()
            pytest.fail("a data-parallel worker did not finish in time")
    assert all(p.exitcode == 0 for p in procs)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2))
    # Both processes end with the same model: V stayed in sync, U rows were gathered.
    torch.testing.assert_close(r0["U"], r1["U"], rtol=0, atol=0)
    torch.testing.assert_close(r0["V"], r1["V"], rtol=0, atol=0)
    torch.testing.assert_close(r0["loss"], r1["loss"])
    split = _data()
    assert r0["seen"].tolist() == (split.train.user_counts() > 0).tolist()
    auc_two = evaluate(LFPL.from_factors(r0["U"], r0["V"]), split).auc
    # One process, same global batch, three training seeds: the seed noise on this small set.
    auc_one = []
    for seed in range(3):
        one = LFPL(split.train.n_users, split.train.n_items, 4, seed=0)
        fit_implicit(one, split.train, batch_size=512, seed=seed, **SETTINGS)
        auc_one.append(evaluate(one, split).auc)
    assert min(auc_one) > 0.85
    assert min(auc_one) - 0.02 <= auc_two <= max(auc_one) + 0.02


def test_shard_by_user_partitions_the_interactions():
    split = _data()
    shards = [shard_by_user(split.train, r, 3) for r in range(3)]
    assert sum(len(s) for s in shards) == len(split.train)
    for r, shard in enumerate(shards):
        assert bool((shard.users % 3 == r).all())
        assert (shard.n_users, shard.n_items) == (split.train.n_users, split.train.n_items)
    with pytest.raises(ValueError, match=r"rank must lie in \[0, 3\), got 3"):
        shard_by_user(split.train, 3, 3)


def test_process_group_without_init_raises():
    split = _data()
    model = LFPL(split.train.n_users, split.train.n_items, 2, seed=0)
    with pytest.raises(ValueError, match=r"torch\.distributed is not initialised"):
        fit_implicit(model, split.train, epochs=1, process_group="default")
