"""The loop's record of answers (AnswerRecord) and its settings (LoopConfig)."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.likelihoods import ObservationKind, PairwiseProbit, Ranking
from botorch_pref.loop import Answer, LoopConfig
from botorch_pref.loop.config import DEFAULT_KERNEL
from botorch_pref.loop.records import AnswerRecord

DT = torch.float64
BOUNDS = torch.tensor([[0.0, 10.0], [2.0, 20.0]], dtype=DT)
TKW = {"device": torch.device("cpu"), "dtype": DT}


def _q(*rows):
    return torch.tensor(rows, dtype=DT)


def test_designs_and_observations_are_appended_and_reused_designs_keep_their_index():
    rec = AnswerRecord(2, BOUNDS, "pairs", TKW)
    first = [_q([0.0, 10.0], [2.0, 20.0]), _q([1.0, 15.0], [0.5, 12.0])]
    rec.commit(rec.extend(first, [Answer("winner", 1)] * 2), [Answer("winner", 1)] * 2)
    # member 0 compares a design again, member 1 two new ones
    second = [_q([2.0, 20.0], [1.0, 11.0]), _q([0.2, 19.0], [1.5, 10.5])]
    ext = rec.extend(second, [Answer("winner", 0)] * 2)
    assert rec.counts == [2, 2] and rec.n_answers == 1  # extend changes nothing
    rec.commit(ext, [Answer("winner", 0)] * 2)
    assert rec.counts == [3, 4] and rec.X_user.shape == (2, 4, 2)
    assert torch.equal(rec.X_user[0, 3], rec.X_user[0, 0])  # padding: the first design
    torch.testing.assert_close(rec.X_unit[1, 2], torch.tensor([0.1, 0.9], dtype=DT))
    assert rec.query(0, 1).query.tolist() == second[0].tolist()
    assert rec.entries[0][1][0] == (1, 2)  # the repeated design is datapoint 1
    assert rec.member_data(0).as_comparisons().tolist() == [[1, 0], [1, 2]]
    assert rec.member_data(1).as_comparisons().tolist() == [[1, 0], [2, 3]]
    assert rec.data.batch_shape == (2,)


def test_members_with_different_answers_are_padded_with_empty_rows():
    rec = AnswerRecord(2, BOUNDS, "choice", TKW)
    queries = [_q([0.0, 10.0], [1.0, 11.0], [2.0, 12.0]), _q([0.0, 10.0], [1.0, 11.0])]
    answers = [Answer("ranking", 2, (2, 0, 1)), Answer("tie")]
    rec.commit(rec.extend(queries, answers), answers)
    assert rec.data.options.shape == (2, 1, 3)
    assert int(rec.member_data(0).kind[0]) == ObservationKind.RANKING
    assert int(rec.member_data(1).kind[0]) == ObservationKind.TIE
    assert rec.member_data(1).options.tolist() == [[0, 1, -1]]


def test_config_resolves_every_default_once():
    c = LoopConfig(6, "qeubo", 3, seed=1)
    assert (c.n_initial, c.answers, c.mc_samples, c.q_opt) == (20, "choice", 128, 3)
    assert (c.num_restarts, c.raw_samples) == (10, 512)
    assert isinstance(c.likelihood(), Ranking)
    assert LoopConfig(2, seed=1).n_initial == 8
    pairs = LoopConfig(2, "champion-challenger", ties=True, seed=1)
    assert pairs.q_opt == 1 and isinstance(pairs.likelihood(), PairwiseProbit)
    assert [k for k in range(1, 41) if c.refit_due(k)] == [*range(1, 31), 35, 40]
    assert LoopConfig(2).seed >= 0  # drawn when not given


def test_config_hands_the_factory_its_kernel_prior_and_link():
    from botorch_pref.likelihoods import PairwiseLogit

    c = LoopConfig(2, kernel="rbf", lengthscale_prior="dim_scaled", link="logit", seed=1)
    kwargs = c.model_kwargs()
    assert isinstance(kwargs.pop("likelihood"), PairwiseLogit)
    assert kwargs == {"lengthscale_prior": "dim_scaled"}
    ties = LoopConfig(2, link="logit", ties=True, seed=1).likelihood()
    assert isinstance(ties, PairwiseLogit) and ties.has_ties
    laplace = {"seed": 1, "inference": "laplace"}
    assert LoopConfig(2, kernel="matern32", **laplace).model_kwargs() == {"base_kernel": "matern32"}
    assert LoopConfig(2, kernel="rbf", **laplace).model_kwargs() == {}
    assert LoopConfig(2, model="pairwisegp", seed=1).kernel is None
    assert LoopConfig(2, seed=1).kernel == DEFAULT_KERNEL


def test_config_resolves_the_inference_from_the_answers():
    from botorch_pref.loop.config import DEFAULT_INFERENCE

    assert LoopConfig(2, seed=1).inference == DEFAULT_INFERENCE  # probit pairs
    for other in ({"ties": True}, {"link": "logit"}, {"strategy": "qeubo", "q": 3}):
        assert LoopConfig(2, seed=1, **other).inference == "laplace"  # the default for these
    assert LoopConfig(2, model="pairwisegp", seed=1).inference is None  # its own
    assert LoopConfig(2, inference="ep", seed=1).model_kwargs()["inference"] == "ep"
    ties = LoopConfig(2, inference="ep", ties=True, seed=1)  # the ordinal probit
    assert ties.model_kwargs()["inference"] == "ep" and ties.likelihood().has_ties
    assert "inference" not in LoopConfig(2, inference="laplace", seed=1).model_kwargs()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "ucb"}, "strategy"),
        ({"q": 1}, "q >= 2"),
        ({"strategy": "eubo", "q": 3}, "pairs"),
        ({"n_initial": -1}, "n_initial"),
        ({"refit_every": 0}, "refit_every"),
        ({"answers": "votes"}, "answers"),
        ({"q": 3, "ties": True, "strategy": "qeubo"}, "ties"),
        ({"model": "pairwisegp", "ties": True}, "pairs only"),
        ({"model": "svgp"}, "model"),
        ({"champion_variant": "x"}, "champion_variant"),
        ({"dtype": torch.int64}, "dtype"),
        ({"seed": -3}, "seed"),
        ({"kernel": "periodic"}, "kernel"),
        ({"kernel": "matern52", "model": "pairwisegp"}, "kernel"),
        ({"lengthscale_prior": "flat"}, "lengthscale_prior"),
        ({"lengthscale_prior": "dim_scaled", "model": "pairwisegp"}, "lengthscale_prior"),
        ({"link": "cauchit"}, "link"),
        ({"link": "logit", "model": "pairwisegp"}, "probit link"),
        ({"inference": "vb"}, "inference must be one of"),
        ({"inference": "ep", "model": "pairwisegp"}, "needs model='laplace'"),
        ({"inference": "ep", "link": "logit"}, "probit pair answers"),
        ({"inference": "ep", "strategy": "qeubo", "q": 3}, "probit pair answers"),
    ],
)
def test_config_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LoopConfig(2, **kwargs)
