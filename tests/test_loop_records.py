"""The loop's record of answers (AnswerRecord) and its settings (LoopConfig)."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.likelihoods import ObservationKind, PairwiseProbit, Ranking
from botorch_pref.loop import Answer, LaplaceFactory, LoopConfig, pairwisegp_model
from botorch_pref.loop.config import DEFAULT_KERNEL
from botorch_pref.loop.history import AnswerRecord
from botorch_pref.loop.policy import configure

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
    c, policy = configure(6, "qeubo", 3, None, {"seed": 1})
    assert (policy.n_initial, c.answers.mode, policy.steps[-1].mc_samples) == (20, "choice", 128)
    assert (c.num_restarts, c.raw_samples) == (None, None)  # resolved for the policy's strategy
    assert c.with_effort(3).num_restarts == 10 and c.with_effort(3).raw_samples == 512
    assert isinstance(c.likelihood(), Ranking)
    assert configure(2, None, 2, None, {"seed": 1})[1].n_initial == 8
    pairs, policy = configure(2, "champion-challenger", 2, None, {"ties": True, "seed": 1})
    assert policy.steps[-1].q_opt == 1 and isinstance(pairs.likelihood(), PairwiseProbit)
    assert [k for k in range(1, 41) if c.refit_due(k)] == [*range(1, 31), 35, 40]
    assert LoopConfig(2).seed >= 0  # drawn when not given


def test_config_hands_the_factory_its_likelihood():
    ties = LoopConfig(2, ties=True, seed=1).likelihood()
    assert isinstance(ties, PairwiseProbit) and ties.has_ties
    assert LoopConfig(2, seed=1).model_kwargs() == {}  # the model's default probit
    assert isinstance(LoopConfig(2, 3, seed=1).model_kwargs()["likelihood"], Ranking)


def test_the_loops_kernel_and_inference_are_the_laplace_factorys(monkeypatch):
    """``model="laplace"`` resolves to the loop's factory with the loop's kernel; ``kernel=``
    and ``inference=`` set its fields, and it hands them to ``laplace_model`` explicitly."""
    from botorch_pref.loop import config as config_module

    assert LoopConfig(2, seed=1).model == LaplaceFactory(DEFAULT_KERNEL, "ep")
    assert LoopConfig(2, model="laplace-box", seed=1).model.name == "laplace-box"
    rbf = configure(2, None, 2, None, {"kernel": "rbf", "inference": "laplace", "seed": 1})[0]
    assert rbf == LoopConfig(2, model=LaplaceFactory("rbf", "laplace"), seed=1)
    assert rbf.settings["model"] == "laplace" and rbf.settings["kernel"] == "rbf"
    seen = {}
    monkeypatch.setattr(config_module, "laplace_model", lambda *a, **kw: seen.update(kw))
    rbf.model(torch.rand(3, 2, dtype=DT), torch.tensor([[0, 1]]))
    assert seen == {"base_kernel": "rbf", "inference": "laplace"}  # explicit, not defaults
    pairwisegp = LoopConfig(2, model="pairwisegp", seed=1)
    assert pairwisegp.model is pairwisegp_model and pairwisegp.model_kwargs() == {}
    assert pairwisegp.settings["kernel"] is None and pairwisegp.packaged_model


def test_each_setting_has_one_home_and_the_settings_rebuild_the_run():
    from botorch_pref.loop import PreferenceOptimizer
    from botorch_pref.loop.config import MODEL_SETTINGS
    from botorch_pref.loop.policy import CONFIG_SETTINGS, POLICY_SETTINGS, SETTINGS

    assert MODEL_SETTINGS == ("kernel", "inference") and len(set(SETTINGS)) == len(SETTINGS)
    assert not set(CONFIG_SETTINGS) & (set(MODEL_SETTINGS) | set(POLICY_SETTINGS))
    opt = PreferenceOptimizer(BOUNDS, model="laplace-box", kernel="matern52", ties=True, seed=3)
    assert opt.config.model == LaplaceFactory("matern52", "laplace", box=True)
    again = PreferenceOptimizer(BOUNDS, **opt.settings)
    assert again.config == opt.config and again.policy == opt.policy


def test_config_resolves_the_inference_from_the_answers():
    from botorch_pref.loop.config import DEFAULT_INFERENCE

    assert LoopConfig(2, seed=1).model.inference == DEFAULT_INFERENCE  # probit pairs
    for other in ({"ties": True}, {"q": 3}):
        assert LoopConfig(2, seed=1, **other).model.inference == "laplace"  # the default here
    assert LoopConfig(2, model="pairwisegp", seed=1).settings["inference"] is None  # its own
    ep_ties = LoopConfig(2, model=LaplaceFactory(inference="ep"), ties=True, seed=1)
    assert ep_ties.model.inference == "ep" and ep_ties.likelihood().has_ties  # ordinal probit
    laplace = configure(2, None, 2, None, {"inference": "laplace"})[0]
    assert laplace.model.inference == "laplace"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "ucb"}, "strategy"),
        ({"q": 1}, "q >= 2"),
        ({"strategy": "eubo", "q": 3}, "pairs"),
        ({"n_initial": -1}, "n_initial"),
        ({"champion_variant": "x"}, "champion_variant"),
        ({"refit_every": 0}, "refit_every"),
        ({"answers": "votes"}, "answers"),
        ({"q": 3, "ties": True, "strategy": "qeubo"}, "ties"),
        ({"model": "pairwisegp", "ties": True}, "pairs only"),
        ({"model": "svgp"}, "model"),
        ({"dtype": torch.int64}, "dtype"),
        ({"seed": -3}, "seed"),
        ({"kernel": "periodic"}, "kernel"),
        ({"kernel": "matern52", "model": "pairwisegp"}, "kernel"),
        ({"inference": "vb"}, "inference must be one of"),
        ({"inference": "ep", "model": "pairwisegp"}, "needs model='laplace'"),
        ({"inference": "ep", "strategy": "qeubo", "q": 3}, "probit pair answers"),
    ],
)
def test_config_rejects_bad_settings(kwargs, message):
    kwargs = dict(kwargs)
    with pytest.raises(ValueError, match=message):
        configure(2, kwargs.pop("strategy", None), kwargs.pop("q", 2), None, kwargs)


@pytest.mark.parametrize("name", ["lengthscale_prior", "link", "strategy_x"])
def test_unknown_settings_raise_a_type_error(name):
    with pytest.raises(TypeError, match="unknown settings"):
        configure(2, None, 2, None, {name: 1})


def test_an_answer_is_checked_once_and_the_history_never_again(monkeypatch):
    """Through ``tell`` the data layer checks the new answer's rows only: joining it to the
    history and slicing members out of it take the checked parts as they are (the model's own
    input check, in the model, is the one pass over the history left)."""
    import inspect

    from botorch_pref.data.preferences import PreferenceData
    from botorch_pref.loop import PreferenceOptimizer

    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    opt = PreferenceOptimizer(bounds, "random", q=3, seed=0, n_initial=2)
    for _ in range(6):
        X = opt.ask()
        opt.tell(X, ranking=[2, 0, 1])
    checked, original = [], PreferenceData._check

    def spy(self):
        files = [f.filename for f in inspect.stack()[1:]]
        in_model = any("/models/" in f or "/inference/" in f for f in files)
        checked.append((self.options.shape[-2], in_model))
        return original(self)

    monkeypatch.setattr(PreferenceData, "_check", spy)
    X = opt.ask()
    opt.tell(X, ranking=[1, 0, 2])
    outside = [rows for rows, in_model in checked if not in_model]
    assert outside and max(outside) == 1  # the new answer's row (one Plackett-Luce ranking)
    assert len(opt.preference_data) == 7
