"""``label_instruction``: every label in one LABEL line, escaped so that nothing is substituted;
None (the build API is used instead) when a label cannot be written on one parsed line."""

from __future__ import annotations

from harness.engine.layers import MAX_LABEL_INSTRUCTION, label_instruction


def test_labels_are_sorted_quoted_and_escaped():
    line = label_instruction({"b.key": 'x "y" $HOME \\', "a.key": "plain"})
    assert line == 'LABEL "a.key"="plain" "b.key"="x \\"y\\" \\$HOME \\\\"'


def test_a_line_break_anywhere_gives_none():
    assert label_instruction({"k": "a\nb"}) is None
    assert label_instruction({"k": "a\rb"}) is None
    assert label_instruction({"k\n": "v"}) is None


def test_a_line_longer_than_the_parser_reads_gives_none():
    assert label_instruction({"k": "v" * (MAX_LABEL_INSTRUCTION - 20)}) is not None
    assert label_instruction({"k": "v" * MAX_LABEL_INSTRUCTION}) is None


def test_no_labels_gives_none():
    assert label_instruction({}) is None
