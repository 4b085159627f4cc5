"""Every option of every ``botorch-pref`` sub-command shows its default in ``--help``."""

from __future__ import annotations

import argparse

from botorch_pref.cli import _default_text, _parsers, build_parser


def _options() -> list[tuple[argparse.ArgumentParser, argparse.Action]]:
    return [
        (parser, action)
        for parser in _parsers(build_parser())
        for action in parser._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction)
    ]


def test_every_option_with_a_default_shows_it():
    missing = []
    for parser, action in _options():
        if _default_text(action) is None:
            continue
        shown = parser._get_formatter()._expand_help(action) if action.help else ""
        if "(default" not in shown:
            missing.append(f"{parser.prog} {action.option_strings[-1]}")
    assert not missing, f"--help shows no default for: {missing}"


def test_progress_is_spelled_one_way_everywhere():
    spellings = {
        tuple(action.option_strings)
        for _, action in _options()
        if any("progress" in flag for flag in action.option_strings)
    }
    assert spellings == {("--progress", "--no-progress")}


def test_every_choice_of_the_demo_and_lfpl_is_explained():
    for parser, action in _options():
        if not action.choices or not parser.prog.startswith(
            ("botorch-pref demo", "botorch-pref lfpl")
        ):
            continue
        for choice in action.choices:
            assert str(choice) in (action.help or ""), (
                f"{parser.prog} {action.option_strings}: {choice}"
            )
