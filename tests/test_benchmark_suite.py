"""The question-quality suite's problem names (``benchmarks/suite.py``)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from benchmarks import suite, suite_questions
from botorch_pref.test_functions import get_utility


def test_named_groups_expand_in_order_without_repeats():
    assert suite.expand_problems(None) == list(suite.SUITE)
    assert suite.expand_problems(["Holdout", "branin", "hartmann3"]) == [
        *suite.HOLDOUT,
        "branin",
    ]
    assert suite.expand_problems(["levy4", "suite"])[:2] == ["levy4", "hartmann6"]


def test_holdout_problems_exist_and_lie_outside_the_suite():
    assert not set(suite.HOLDOUT) & set(suite.SUITE)
    for name in (*suite.SUITE, *suite.HOLDOUT):
        assert get_utility(get_utility(name).name).name == get_utility(name).name


def _cell(curves: dict[int, list[float]]) -> dict:
    return {"seeds": list(curves), "log_regret": list(curves.values())}


def test_answers_to_match_is_the_first_query_from_which_the_mean_stays_at_the_anchors():
    ours = _cell({0: [0.0, -1.0, -1.5, -3.0], 1: [0.0, 0.0, -0.5, -1.0], 5: [9.0, 9.0, 9.0, 9.0]})
    anchor = _cell({0: [0.0, -0.5, -1.0], 1: [0.0, 0.0, 0.0], 2: [-9.0, -9.0, -9.0]})
    # Shared seeds 0 and 1: the anchor's mean after 2 queries is -0.5; ours' means are 0, -0.5.
    assert suite.answers_to_match(ours, anchor, 2) == 1
    assert suite.answers_to_match(ours, anchor, 1) == 1  # target -0.25
    # A target ours never reaches within its curves, and no shared seed.
    assert suite.answers_to_match(ours, _cell({0: [0.0, -5.0], 1: [0.0, -5.0]}), 1) is None
    assert suite.answers_to_match(ours, _cell({7: [0.0, -1.0]}), 1) is None
    # A mean that touches the target and rises again has matched it only where it stays.
    wavy = _cell({0: [0.0, -1.0, 0.0, -1.0, -1.0], 1: [0.0, -1.0, 0.0, -1.0, -0.5]})
    assert suite.answers_to_match(wavy, anchor, 2) == 3  # means 0, -1, 0, -1, -0.75; target -0.5
    ends_above = _cell({0: [0.0, -1.0, 0.0], 1: [0.0, -1.0, 0.0]})
    assert suite.answers_to_match(ends_above, anchor, 2) is None


def test_the_table_reports_the_answers_to_match():
    ours = _cell({0: [0.0, -1.0, -2.0], 1: [0.0, -1.0, -2.0]}) | {"seconds_per_query": 0.1}
    anchor = _cell({0: [0.0, -0.5, -1.0], 1: [0.0, -0.5, -1.0]}) | {"seconds_per_query": 1.0}
    text = suite.table({"branin": {"eubo": {"ours": ours, "anchor": anchor}}}, 2)
    header, _, row = text.splitlines()
    column = header.split(" | ").index("ours matches BoTorch @2 after")
    assert row.split(" | ")[column] == "1"
    slow = _cell({0: [0.0, 0.0, 0.0], 1: [0.0, 0.0, 0.0]}) | {"seconds_per_query": 0.1}
    row = suite.table({"branin": {"eubo": {"ours": slow, "anchor": anchor}}}, 2).splitlines()[2]
    assert row.split(" | ")[column] == "> 2"
    elsewhere = _cell({3: [0.0, -0.5, -1.0]}) | {"seconds_per_query": 1.0}
    row = suite.table({"branin": {"eubo": {"ours": ours, "anchor": elsewhere}}}, 2).splitlines()[2]
    assert row.split(" | ")[column] == "-"


def _payload(cell: dict, **config) -> dict:
    return {"config": config, "results": {"branin": {"eubo": {"ours": cell}}}}


def test_compare_labels_the_checkpoints_it_shows_and_refuses_other_error_rates():
    a = _payload(_cell({0: [0.0, -1.0, -2.0, -3.0], 1: [0.0, -1.0, -1.0, -1.0]}))
    b = _payload(_cell({0: [0.0, 0.0, -1.0, -1.0], 1: [0.0, 0.0, 0.0, 0.0]}))
    header, _, row, mean = suite.compare(a, b, 3).splitlines()
    assert header == "| problem | strategy | A - B @3 |"
    assert row.startswith("| branin | eubo | -1.50") and mean.endswith("@3, eubo: -1.500")
    elsewhere = _payload(_cell({7: [0.0, 0.0, 0.0, 0.0]}))
    assert suite.compare(a, elsewhere, 3).splitlines()[2] == "| branin | eubo | - |"
    with pytest.raises(ValueError, match="different rates"):
        suite.compare(a, _payload(_cell({0: [0.0] * 4}), error_rate=0.1), 3)
    assert suite.error_rate(a) == 0.2 and suite.error_rate(_payload({}, error_rate=0.1)) == 0.1


def test_compare_pools_batches_of_seeds_read_through_a_glob(tmp_path, capsys):
    timed = {"seconds_per_query": 0.1}
    batches = {
        "a-s0": _cell({0: [0.0, -1.0], 1: [0.0, -2.0]}) | timed,
        "a-s2": _cell({2: [0.0, -3.0]}) | timed,
        "b-s0": _cell({0: [0.0, 0.0], 1: [0.0, 0.0]}) | timed,
        "b-s2": _cell({2: [0.0, 0.0]}) | timed,
    }
    for name, cell in batches.items():
        payload = _payload(cell, queries=1, error_rate=0.2)
        (tmp_path / f"{name}-suite.json").write_text(json.dumps(payload))
    a, b = (str(tmp_path / f"{x}-s*-suite.json") for x in "ab")
    from benchmarks import pbo

    assert pbo.main(["--compare", a, b]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "| branin | eubo | -2.00 +- 0.58 |"
    pooled = suite.pool(suite.read_runs(a))
    assert pooled["results"]["branin"]["eubo"]["ours"]["seeds"] == [0, 1, 2]
    # Paired over the three seeds: (-1 - 2 - 3) / 3 after one query.
    assert suite.compare(pooled, suite.pool(suite.read_runs(b)), 1).endswith("@1, eubo: -2.000")
    with pytest.raises(ValueError, match="share seeds"):
        suite.pool(suite.read_runs(a) * 2)
    with pytest.raises(ValueError, match="different numbers of queries"):
        suite.pool([_payload(batches["a-s0"], queries=1), _payload(batches["a-s2"], queries=2)])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--suite", "--problems", "branin", "--replications", "0"], "--replications must be"),
        (["--queries", "-1"], "--queries >= 1"),
        (["--q", "1"], "--q >= 2"),
        (["--problems", "nosuch"], "Unknown utility 'nosuch'"),
        (["--suite", "--problems", "branin", "--set", "nosuch=1"], "not a loop setting"),
        (["--suite", "--set", "ties=true", "--set", "nosuch=1"], "not a loop setting"),
        (["--suite", "--problems", "branin", "--q", "3"], "--q: not used by the suite"),
        (["--tabulate", "x.json", "--models", "laplace"], "--models: not used by the suite"),
        (["--problems", "branin", "--set", "kernel=rbf"], "--set: not used by this mode"),
        (["--batched", "--anchor", "none"], "--anchor: not used by this mode"),
        (["--suite", "--tie-band", "0.5", "--anchor", "none"], "needs --set ties=true"),
        (["--suite", "--tie-band", "0.5", "--set", "ties=true"], "--anchor none"),
        (["--suite", "--tie-band", "-1"], "--tie-band must be"),
        (["--tie-band", "0.5"], "--tie-band: not used by this mode"),
    ],
)
def test_pbo_refuses_settings_no_run_can_use(argv, message, capsys):
    from benchmarks import pbo

    with pytest.raises(SystemExit) as exit_info:
        pbo.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_every_set_flag_adds_its_settings_and_a_setting_comes_once(tmp_path, capsys):
    from benchmarks import pbo

    argv = ["--suite", "--problems", "branin", "--suite-strategies", "random", "--replications",
            "1", "--queries", "1", "--anchor", "none", "--out", str(tmp_path / "run"),
            "--set", "kernel=rbf", "--set", "local_every=0", "lookahead_every=0"]  # fmt: skip
    assert pbo.main(argv) == 0
    config = json.loads((tmp_path / "run-suite.json").read_text())["config"]
    assert config["settings"] == {"kernel": "rbf", "local_every": 0, "lookahead_every": 0}
    for extra, message in ((["kernel=matern52"], "given more than once"),
                           (["ties"], "expected NAME=VALUE")):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            pbo.main([*argv, "--set", *extra])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_pbo_merge_refuses_a_run_given_twice(tmp_path):
    from benchmarks import pbo

    run = {"problem": "branin", "model": "laplace", "strategy": "eubo", "replication": 0,
           "seed": 0, "n_initial": 2, "regret": [1.0, 0.5, 0.1]}  # fmt: skip
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"config": {"checkpoints": [1]}, "runs": [run]}))
    assert len(pbo.load_runs([str(path)])[0]) == 1
    with pytest.raises(SystemExit, match="repeats the run branin laplace eubo seed 0"):
        pbo.load_runs([str(path), str(path)])


def test_log_regret_asked_averages_the_log10_regrets_of_a_querys_options():
    branin = get_utility("branin")
    best, other = branin.optimizers[0], torch.tensor([0.1, 0.9], dtype=torch.float64)
    designs = torch.stack([torch.stack([best, other]), torch.stack([other, other])])  # 2 x 2 x 2
    got = suite_questions.log_regret_asked("branin", designs.unsqueeze(0))  # one run, two queries
    r = float(branin.regret(other))  # the optimum's own regret is floored at 1e-12
    assert got.shape == (1, 2) and r > 0.1
    expected = [[(-12.0 + math.log10(r)) / 2, math.log10(r)]]
    assert torch.allclose(got, torch.tensor(expected, dtype=torch.float64))


def test_the_questions_table_pairs_the_asked_designs_of_seeds_both_sides_recorded():
    ours = _cell({0: [0.0] * 4, 1: [0.0] * 4, 2: [0.0] * 4})
    ours["log_regret_asked"] = [[1.0, 1.0, 0.0, 0.0], [3.0, 3.0, 2.0, 0.0], [9.0] * 4]
    anchor = _cell({0: [0.0] * 4, 1: [0.0] * 4, 5: [0.0] * 4})
    anchor["log_regret_asked"] = [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [9.0] * 4]
    pairs = {("levy6", "eubo"): (ours, anchor), ("branin", "eubo"): (ours, None)}
    title, header, _, row = suite_questions.questions(pairs, 4, block=2).splitlines()
    assert title.endswith("designs asked, ours / BoTorch")
    assert header == (
        "| problem | strategy | seeds | queries 1-2 | queries 3-4 | ours - BoTorch, queries 3-4 |"
    )
    # Seeds 0 and 1: ours averages 2.0 then 0.5, BoTorch's 1.0 then 1.0; differences -1, -0.
    assert row == "| levy6 | eubo | 2 | +2.00 / +1.00 | +0.50 / +1.00 | -0.50 +- 0.50 |"
    anchor["log_regret_asked"][1] = None  # a run cached before designs were recorded
    row = suite_questions.questions(pairs, 4, block=2).splitlines()[3]
    assert row == "| levy6 | eubo | 1 | +1.00 / +1.00 | +0.00 / +1.00 | -1.00 |"
    del anchor["log_regret_asked"]  # no run with designs: no table
    assert suite_questions.questions(pairs, 4, block=2) == ""


def test_compare_shows_where_two_runs_questions_go_when_both_recorded_them():
    a = _cell({0: [0.0, -1.0], 1: [0.0, -1.0]}) | {"log_regret_asked": [[0.5], [1.5]]}
    b = _cell({0: [0.0, 0.0], 1: [0.0, 0.0]}) | {"log_regret_asked": [[2.0], [2.0]]}
    lines = suite.compare(_payload(a), _payload(b), 1).splitlines()
    assert lines[lines.index("") + 1].endswith("designs asked, A / B")
    assert lines[-1] == "| branin | eubo | 2 | +1.00 / +2.00 | -1.00 +- 0.50 |"


def test_botorchs_cached_runs_give_the_regret_of_the_designs_they_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(suite.suite_anchor, "CACHE", tmp_path)
    branin = get_utility("branin")
    best, far = branin.optimizers[0].tolist(), [0.0, 0.0]
    # One initial query (its designs are skipped), then two acquisition queries.
    run = {"n_initial": 1, "q": 2, "regret": [1.0, 0.5, 0.1], "regret_compared": [1.0, 0.5, 0.1],
           "seconds": [1.0, 1.0], "designs": [far, far, best, far, best, best]}  # fmt: skip
    for seed in (0, 1):
        path = suite.suite_anchor.cache_path("branin", "eubo", 2, seed, 2, 1.0)
        path.write_text(
            json.dumps(run if seed == 0 else {k: run[k] for k in run if k != "designs"})
        )
    r_far = math.log10(float(branin.regret(torch.tensor(far, dtype=torch.float64))))
    cell = suite.run_anchor("branin", "eubo", 1, 2, 0, 1.0, "cached")
    assert cell["log_regret_asked"][0] == pytest.approx([(r_far - 12.0) / 2, -12.0])
    # A run cached before designs were recorded has None in their place, also when merged.
    both = suite.run_anchor("branin", "eubo", 2, 2, 0, 1.0, "cached")
    assert both["seeds"] == [0, 1] and both["log_regret_asked"][1] is None
    older = {k: v for k, v in cell.items() if k != "log_regret_asked"} | {"seeds": [3]}
    merged = suite.merge({"ours": None, "anchor": both}, {"ours": None, "anchor": older})
    assert merged["anchor"]["log_regret_asked"] == [*both["log_regret_asked"], None]
    assert "log_regret_asked" not in suite.run_anchor("branin", "eubo", 1, 2, 1, 1.0, "cached")
