"""The README's examples, extracted from README.md, run as written and print sensible values.

Each example sits between ``<!-- example: NAME -->`` and ``<!-- end example -->``; the suite
reads them from the README itself, so an edit of the README is what is tested.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
EXAMPLES = dict(
    re.findall(
        r"<!-- example: (\w+) -->\n```python\n(.*?)```\n<!-- end example -->", TEXT, flags=re.S
    )
)


def _run(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    exec(compile(EXAMPLES[name], f"README.md[example {name}]", "exec"), {"__name__": "readme"})
    return capsys.readouterr().out.strip()


def test_readme_is_short_and_has_its_three_examples():
    assert len(TEXT.splitlines()) <= 200
    assert set(EXAMPLES) == {"model", "loop", "session"}
    assert len(re.findall(r"```python\n", TEXT)) == len(EXAMPLES), (
        "a Python block outside the markers"
    )


def test_model_example_prefers_the_design_near_the_optimum(capsys):
    out = _run("model", capsys)
    probability = float(
        re.fullmatch(r"P\(\(0\.3, 0\.3\) beats \(0\.9, 0\.9\)\) = ([\d.]+)", out)[1]
    )
    assert 0.9 <= probability <= 1.0


def test_loop_example_reaches_a_small_regret(capsys):
    out = _run("loop", capsys)
    regret = float(re.fullmatch(r"after 20 answers: regret ([\d.]+)", out)[1])
    assert 0.0 <= regret < 5.0  # a random design's median regret on Branin is about 34


def test_session_example_recommends_near_the_persons_taste(capsys):
    best = ast.literal_eval(_run("session", capsys))
    assert set(best) == {"sweetness", "sourness"}
    assert 5.0 <= best["sweetness"] <= 9.0 and 0.0 <= best["sourness"] <= 2.5
