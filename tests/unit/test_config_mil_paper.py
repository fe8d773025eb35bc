"""CORD's MIL statements as the paper writes them (seeds/001, Figure 2 and section 3): the
ones polybus cannot take as written are refused with what to write instead, at the
place they were written."""

from __future__ import annotations

import pytest

from polybus.config.mil import parse_mil
from polybus.errors import ConfigError

# Section 3.2.2's server, its replication list broken over three lines inside one string
REPLICATION_OVER_LINES = '''module server {
  source = "server.py" ::
  define interface compare
  : priority = "len(query)"
  : replication = "harvey.cs.umd.edu,
               bugs.cs.umd.edu,
               thumper.cs.umd.edu"
  : interface = "null" ::
}
'''


def test_a_string_left_open_at_the_end_of_its_line_says_so_and_how_to_split_it() -> None:
    with pytest.raises(ConfigError) as info:
        parse_mil(REPLICATION_OVER_LINES, "a.cfg")
    assert info.value.file == "a.cfg:5:19"
    text = str(info.value)
    assert "not closed on its line" in text
    assert "adjacent strings" in text
    assert '"harvey.cs.umd.edu,"' in text  # (the start of the string, cut where it breaks)


def test_the_same_list_as_adjacent_strings_is_one_replication() -> None:
    text = REPLICATION_OVER_LINES.replace(
        '"harvey.cs.umd.edu,\n               bugs.cs.umd.edu,\n               thumper',
        '"harvey.cs.umd.edu,"\n               "bugs.cs.umd.edu,"\n               "thumper')
    doc, _ = parse_mil(text, "a.cfg")
    assert doc["modules"]["server"]["replication"] == (
        "harvey.cs.umd.edu,bugs.cs.umd.edu,thumper.cs.umd.edu")


def test_a_string_left_open_at_the_end_of_the_file_says_so_too() -> None:
    with pytest.raises(ConfigError) as info:
        parse_mil('module c { source = "c.py', "a.cfg")
    assert info.value.file == "a.cfg:1:21"
    assert "not closed on its line" in str(info.value)


@pytest.mark.parametrize("place", ["local", "remote"])
def test_cords_source_of_a_language_and_a_place_is_told_what_polybus_takes(place: str) -> None:
    # Figure 2: source = "C" "local" :: (joined, it was looked for as a file 'Clocal')
    with pytest.raises(ConfigError) as info:
        parse_mil(f'module client {{\n  source = "C" "{place}" ::\n}}', "a.cfg")
    assert info.value.file == "a.cfg:2:12"
    text = str(info.value)
    assert f'"{place}"' in text and "the module's Python file" in text
    assert 'source = "client.py"' in text
    # (CORD's local placement of a served module is polybus's replication = 0)
    assert ("replication = 0 ::" in text) is (place == "local")


def test_a_file_name_in_adjacent_strings_is_still_a_file_name() -> None:
    doc, _ = parse_mil('module c {\n  source = "sub/" "client.py" ::\n}', "a.cfg")
    assert doc["modules"]["c"]["source"] == "sub/client.py"


@pytest.mark.parametrize("string", [r'"server\q.py"', r'"a\u12"', r'"ok" "C:\dir"'])
def test_a_string_with_an_escape_it_cannot_have_is_said_at_its_place(string: str) -> None:
    # (it failed with json's JSONDecodeError and a traceback)
    with pytest.raises(ConfigError) as info:
        parse_mil(f"module server {{\n  source = {string} ::\n}}", "a.cfg")
    bad = string.rsplit(" ", 1)[-1]
    assert info.value.file == f"a.cfg:2:{12 + string.index(bad)}"
    text = str(info.value)
    assert f"bad escape in the string {bad}" in text and "\\\\" in text
