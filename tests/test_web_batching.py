"""Several sessions' next queries in one batched step (``botorch_pref.web.batching``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from botorch.fit import fit_gpytorch_mll

from botorch_pref.data.preferences import PreferenceData
from botorch_pref.likelihoods import PairwiseProbit
from botorch_pref.loop import LoopConfig
from botorch_pref.loop.history import stack_data
from botorch_pref.models.evidence import LaplaceEvidence
from botorch_pref.models.factories import laplace_model
from botorch_pref.optim import fit_evidence_batched
from botorch_pref.sessions import Session
from botorch_pref.web import batching
from botorch_pref.web.batching import Member, group_key, propose_together
from tests.helpers import same_recommendation

PARAMS = {"a": (0.0, 1.0), "b": (-1.0, 1.0), "c": (0.0, 2.0)}


def ask_together(*args, **kwargs) -> list:
    """The queries :func:`~botorch_pref.web.batching.ask_together` shows (``None``: waiting)."""
    return [
        None if shown is None else shown.query for shown in batching.ask_together(*args, **kwargs)
    ]


def _answer(s: Session, query, target: np.ndarray) -> None:
    """A noiseless person with a quadratic utility; a tie now and then (ties are modelled)."""
    gaps = [float(np.sum((np.array(list(o.values())) - target) ** 2)) for o in query.as_dicts()]
    if query.id % 7 == 3:
        s.answer(query.id, tie=True)
    else:
        s.answer(query.id, winner=int(np.argmin(gaps)))


def _ties_data(seed: int, n: int = 8, m: int = 14):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64)
    utility = -((X - 0.3) ** 2).sum(-1) * (1 + seed)
    rows, kinds = [], []
    for _ in range(m):
        i, j = torch.randperm(n, generator=g)[:2].tolist()
        if abs(float(utility[i] - utility[j])) < 0.05 * (1 + seed):
            rows.append([i, j])
            kinds.append(True)
        else:
            rows.append([i, j] if utility[i] > utility[j] else [j, i])
            kinds.append(False)
    return X, rows, kinds


def _model(datasets, b: int | None):
    items = []
    for _, rows, ties in datasets:
        data = PreferenceData()
        for (i, j), tie in zip(rows, ties, strict=True):
            data = data.add_tie(i, j) if tie else data.add_comparison(i, j)
        items.append(data)
    if b is None:
        X, data = datasets[0][0], items[0]
    else:
        X, data = torch.stack([d[0] for d in datasets]), stack_data(items)
    model, _ = laplace_model(X, data, likelihood=PairwiseProbit(tie_threshold=0.5))
    return model


def test_batched_model_fits_one_tie_threshold_per_member():
    datasets = [_ties_data(0), _ties_data(1), _ties_data(2)]
    batch = _model(datasets, 3)
    assert batch.likelihood.tie_threshold.shape == (3,)
    fit_evidence_batched(batch)
    thresholds = batch.likelihood.tie_threshold.detach()
    for r, data in enumerate(datasets):
        assert _model([data], None).likelihood.tie_threshold.shape == ()  # unbatched: one
        alone_batch = _model([data], 1)
        fit_evidence_batched(alone_batch)
        torch.testing.assert_close(
            thresholds[r], alone_batch.likelihood.tie_threshold[0].detach(), rtol=0, atol=1e-5
        )
        torch.testing.assert_close(
            batch.covar_module.outputscale[r].detach(),
            alone_batch.covar_module.outputscale[0].detach(),
            rtol=0,
            atol=1e-5,
        )
    assert float(thresholds.max() - thresholds.min()) > 1e-3  # each member its own


def test_sequential_fit_of_a_tie_model_counts_each_prior_once():
    """``LaplaceEvidence`` is the evidence plus each hyperparameter's log prior once (the
    tie threshold's too), so ``fit_gpytorch_mll`` and the batched fitter agree."""
    data = _ties_data(1)
    model = _model([data], None)
    lik, kernel = model.likelihood, model.covar_module
    expected = (
        model.laplace_evidence().sum()
        + lik.tie_threshold_prior.log_prob(lik.tie_threshold)
        + kernel.outputscale_prior.log_prob(kernel.outputscale)
        + kernel.base_kernel.lengthscale_prior.log_prob(kernel.base_kernel.lengthscale).sum()
    )
    torch.testing.assert_close(LaplaceEvidence(lik, model)(), expected)
    fit_gpytorch_mll(LaplaceEvidence(lik, model))
    alone_batch = _model([data], 1)
    fit_evidence_batched(alone_batch)
    torch.testing.assert_close(
        lik.tie_threshold.detach(),
        alone_batch.likelihood.tie_threshold[0].detach(),
        atol=1e-4,
        rtol=0,
    )


def test_preference_probability_of_a_batched_tie_model_is_each_members():
    """Per-member tie thresholds meet the right member for test points with or without a
    leading batch of their own (T = 2 broadcasts only if aligned right; T = 3 = b must not mix
    the members up)."""
    datasets = [_ties_data(0), _ties_data(1), _ties_data(2)]
    batch = _model(datasets, 3)
    batch.likelihood.tie_threshold = torch.tensor([0.1, 1.0, 3.0], dtype=torch.float64)
    members = [_model([data], None) for data in datasets]
    for member, theta in zip(members, (0.1, 1.0, 3.0), strict=True):
        member.likelihood.tie_threshold = theta  # the kernels' initial values are equal
    g = torch.Generator().manual_seed(0)
    for shape in ((3, 2), (2, 3, 2), (3, 3, 2)):
        X1 = torch.rand(shape, generator=g, dtype=torch.float64)
        X2 = torch.rand(shape, generator=g, dtype=torch.float64)
        got = batch.preference_probability(X1, X2).detach()
        assert got.shape == shape[:-1]
        for i, member in enumerate(members):
            want = member.preference_probability(X1[..., i, :], X2[..., i, :]).detach()
            torch.testing.assert_close(got[..., i], want)


def test_batch_tie_threshold_is_validated():
    with pytest.raises(ValueError, match="without a tie_threshold"):
        PairwiseProbit().batch_tie_threshold(torch.Size([2]))
    likelihood = PairwiseProbit(tie_threshold=0.5)
    with pytest.raises(ValueError, match=r"\(b,\)"):
        likelihood.batch_tie_threshold(torch.Size([2, 3]))
    likelihood.batch_tie_threshold(torch.Size([2]))
    torch.testing.assert_close(
        likelihood.tie_threshold.detach(), torch.full((2,), 0.5, dtype=torch.float64)
    )
    with pytest.raises(ValueError, match="already has batch shape"):
        likelihood.batch_tie_threshold(torch.Size([3]))


def _sessions(path, n: int, **options) -> list[Session]:
    return [
        Session.create(path, f"s{i}", PARAMS, "eubo", 2, 10 + i, n_initial=3, **options)
        for i in range(n)
    ]


def test_ask_together_stores_queries_fits_and_resumes_exactly(tmp_path):
    path, alone_path = tmp_path / "together.db", tmp_path / "alone.db"
    together, alone = _sessions(path, 3), _sessions(alone_path, 3)
    targets = [np.array([0.2 + 0.2 * i, 0.1, 1.0]) for i in range(3)]
    for step in range(7):
        shown = batching.ask_together(together)
        for s, alone_s, (query, best), target in zip(together, alone, shown, targets, strict=True):
            assert s.pending() == query  # stored before it is returned
            assert same_recommendation(
                best, s.recommendation()
            )  # the one stored with it (None before a choice)
            if step < 3:  # random queries (n_initial = 3): the session's own
                assert query.options == alone_s.ask().options
                _answer(alone_s, alone_s.pending(), target)
            _answer(s, query, target)
    ask_together(together)  # the query after the last answer stores the fit to all of them
    for s in together:
        state = s.state()
        fits = {f.n_answers for f in state.fits}
        assert fits == set(range(1, 8))  # a fit stored after every answer (the schedule)
        with Session.open(path, s.name) as reopened:  # rebuilt from the stored fits
            h = reopened.optimizer.hyperparameters
            stored = next(f for f in state.fits if f.n_answers == h.n_answers)
            assert h.n_answers == len(s.optimizer.history)
            for name, value in h.to_dict()["values"].items():
                assert value == stored.values["values"][name]
            stored_best, _ = reopened.stored_best()
            assert stored_best is not None
            assert torch.equal(reopened.best().x, stored_best.recommendation.x)
    for s in together + alone:
        s.close()


def test_incompatible_sessions_get_their_own_queries(tmp_path):
    path, alone_path = tmp_path / "mixed.db", tmp_path / "alone.db"
    specs = [("eubo", {}), ("qeubo", {}), ("champion-challenger", {}), ("eubo", {"ties": False})]
    mixed, alone = [], []
    for i, (strategy, options) in enumerate(specs):
        for p, out in ((path, mixed), (alone_path, alone)):
            out.append(Session.create(p, f"s{i}", PARAMS, strategy, 2, i, n_initial=1, **options))
    target = np.array([0.5, 0.0, 1.0])
    for _ in range(3):
        queries = ask_together(mixed)
        for s, alone_s, query in zip(mixed, alone, queries, strict=True):
            assert query.options == alone_s.ask().options  # one at a time: bit for bit
            _answer(s, query, target)
            _answer(alone_s, alone_s.pending(), target)
    for s in mixed + alone:
        s.close()


def test_a_qeubo_session_asks_the_same_whichever_sessions_share_its_step(tmp_path):
    target = np.array([0.4, 0.2, 1.2])
    runs = []
    for name, seeds in (("a", (10, 11)), ("b", (12, 11))):  # the session seeded 11 in both
        path = tmp_path / f"{name}.db"
        sessions = [
            Session.create(path, f"s{i}", PARAMS, "qeubo", 3, seed, n_initial=2)
            for i, seed in enumerate(seeds)
        ]
        asked, steps = [], {}
        for _ in range(4):
            queries = ask_together(sessions, steps)
            asked.append(queries[1].as_dicts())
            for s, query in zip(sessions, queries, strict=True):  # no ties: stay in step
                gaps = [
                    float(np.sum((np.array(list(o.values())) - target) ** 2))
                    for o in query.as_dicts()
                ]
                s.answer(query.id, winner=int(np.argmin(gaps)))
        runs.append(asked)
        assert group_key(sessions[1], 3) is not None
        assert list(steps) == [("s0", "s1")]  # stepped together
        for s in sessions:
            s.close()
    for first, second in zip(*runs, strict=True):
        for x, y in zip(first, second, strict=True):
            assert x == pytest.approx(y, abs=1e-6)


def test_ask_together_returns_pending_queries_unchanged(tmp_path):
    sessions = _sessions(tmp_path / "p.db", 2)
    first = [s.ask() for s in sessions]
    assert [q.id for q in ask_together(sessions)] == [q.id for q in first]
    for s in sessions:
        s.close()


def test_propose_together_needs_members_in_step(tmp_path):
    sessions = _sessions(tmp_path / "q.db", 2)
    _answer(sessions[0], sessions[0].ask(), np.zeros(3))
    members = []
    for s in sessions:
        records, warm = s.replay_input(s.state())
        members.append(Member(s.seed, records, warm))
    config = LoopConfig(3)
    with pytest.raises(ValueError, match="same number"):
        propose_together(config, sessions[0].bounds, members)
    for s in sessions:
        s.close()


def test_a_group_continues_its_batched_state_until_its_answers_change(tmp_path):
    sessions = _sessions(tmp_path / "steps.db", 3)
    target = np.array([0.4, 0.2, 1.5])
    steps: dict = {}
    for s, query in zip(sessions, ask_together(sessions, steps), strict=True):
        _answer(s, query, target)
    assert steps == {}  # no answers before: random queries, no batched step
    held = []
    for _ in range(3):
        for s, query in zip(sessions, ask_together(sessions[::-1], steps)[::-1], strict=True):
            _answer(s, query, target)
        assert list(steps) == [("s0", "s1", "s2")]  # by name, whatever the order asked
        held.append(steps[("s0", "s1", "s2")])
    assert held[0] is held[1] is held[2]  # continued, one answer further each time
    assert held[2].n_answers == 3
    s1 = sessions[1]
    s1.undo()
    s1.undo()  # s1's third answer changes: its group is replayed from the database
    third, again = s1.history()[2].answer, s1.ask()
    if third.kind == "tie":
        s1.answer(again.id, winner=0)
    else:
        s1.answer(again.id, tie=True)
    _answer(s1, s1.ask(), target)
    ask_together(sessions, steps)
    assert steps[("s0", "s1", "s2")] is not held[2]
    assert steps[("s0", "s1", "s2")].n_answers == 4
    for s in sessions:
        s.close()


def test_a_session_alone_may_wait_to_join_the_others(tmp_path):
    sessions = _sessions(tmp_path / "wait.db", 4)
    target = np.array([0.3, -0.2, 0.5])
    for s in sessions:
        _answer(s, s.ask(), target)
    _answer(sessions[0], sessions[0].ask(), target)  # s0 is one answer ahead
    queries = ask_together(sessions, may_wait=[0, 1])
    assert queries[0] is None and sessions[0].pending() is None  # left waiting, nothing stored
    for s, query in zip(sessions[1:], queries[1:], strict=True):
        assert query is not None and s.pending() == query
        _answer(s, query, target)
    steps: dict = {}
    assert all(q is not None for q in ask_together(sessions, steps, may_wait=[0]))
    assert list(steps) == [("s0", "s1", "s2", "s3")]  # now all four in one step
    other = Session.create(tmp_path / "wait.db", "z", PARAMS, "eubo", 2, 1, n_initial=4)
    _answer(other, other.ask(), target)
    for s in sessions:
        _answer(s, s.pending(), target)
    # alone with settings no other session shares: it does not wait
    assert ask_together([other, *sessions], may_wait=[0])[0] is not None
    for s in [other, *sessions]:
        s.close()
