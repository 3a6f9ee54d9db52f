"""Error messages stay one short line whatever the input holds: a quoted piece of input, or a run without blanks
in a reader's message, is cut to its start and its length (a 200,000-digit nvidia-smi cell made a 200,000-character
error line), and prose around it is left as written."""

from __future__ import annotations

from slurmtools.errors import BARE_CHARS, QUOTE_CHARS, ConfigError, OptionError, ParseError, short_input, short_quotes

PROSE = ("',' occurs inside values and the line splits into fields in more than one way (JobName, User, Account, "
         "Partition differ); dump with a --delimiter no value holds (`sacct -P` writes '|'); the site's tiers")


def test_a_long_quoted_piece_is_cut_to_its_start_and_its_length():
    msg = str(ParseError("cap.txt", 7, "expected a link class for column GPU4, found 'NV18" + "0" * 200_000 + "'", 31))
    assert msg == ("cap.txt:7:31: expected a link class for column GPU4, found '" + "NV18" + "0" * (QUOTE_CHARS - 7)
                   + "...' (200,004 characters)")
    assert short_quotes(msg) == msg   # cut once, never again


def test_prose_and_short_quotes_are_left_as_written():
    assert short_quotes(PROSE) == PROSE and short_input(PROSE) == PROSE
    both = '"' + "a'b " * 30 + '"'   # a repr in double quotes holding apostrophes: cut as one piece
    assert short_quotes(both + " " + PROSE) == '"' + "a'b " * 19 + 'a..." (120 characters) ' + PROSE


def test_a_long_bare_key_is_cut_in_a_readers_message_but_never_the_file_name():
    path = "/srv/" + "d" * 300 + "/capture.json"
    msg = str(ParseError(path, None, "gpus[0]." + "x" * 5000 + ": unknown key (keys here: index, name)"))
    assert msg.startswith(path + ": gpus[0].xxx") and msg.endswith("... (5,008 characters): unknown key (keys here: "
                                                                   "index, name)")
    assert len(msg) < len(path) + BARE_CHARS + 60
    cfg = str(ConfigError("c.toml", "campaign." + "x" * 5000, "unknown key"))
    assert cfg.startswith("c.toml: campaign.xxx") and cfg.endswith("(5,009 characters): unknown key")


def test_every_slurmtools_error_cuts_quoted_input_as_it_is_shown():
    msg = str(OptionError("--var: expected KEY=VALUE, got '" + "=" * 10_000 + "'"))
    assert len(msg) < 200 and msg.endswith("...' (10,000 characters)")


def test_long_input_named_bare_with_blanks_loses_its_middle():
    """A YAML key of 50,000 words (the topology fuzzer's mutation 5201): the start says where, the end what is
    wrong, and the line is short."""
    msg = str(ParseError("t.yaml", 4, "treeNV1 " + "NV1 " * 50_000 + ": unknown key (keys here: topology)", 3))
    assert msg.startswith("t.yaml:4:3: treeNV1 NV1") and msg.endswith("NV1 : unknown key (keys here: topology)")
    assert len(msg) < 600 and "characters left out" in msg


def test_usage_errors_are_one_line_naming_the_option():
    """An option value out of range, an unknown option or command, a missing option: click's four lines (usage, a
    hint, a blank, `Error: ...`) become one, naming the option and where the options are listed; exit code 2."""
    import subprocess
    import sys

    cases = [(["topo", "import", "x.txt", "--from", "nvidia-smi", "--threads-per-core", "0"],
              "Invalid value for '--threads-per-core': Input should be greater than or equal to 1"),
             (["sandbox", "example-trace", "--out", "/nonexistent/h.txt", "--jobs", "99999999999"],
              "Invalid value for '--jobs': Input should be less than or equal to 1000000"),
             (["sandbox", "example-trace", "--out", "/nonexistent/h.txt", "--hours", "inf"],
              "Invalid value for '--hours': Input should be less than or equal to 8784"),
             (["plan", "--idle", "--no-such-option"], "No such option: --no-such-option"),
             (["report"], "Missing option '--out'")]
    for args, words in cases:
        r = subprocess.run([sys.executable, "-m", "slurmtools", *args], capture_output=True, text=True)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stdout == "" and r.stderr.count("\n") == 1, (args, r.stderr)
        assert r.stderr.startswith(f"slurmtools: error: {words}"), (args, r.stderr)
        assert f" -m slurmtools {args[0]}" in r.stderr and r.stderr.endswith(" --help`)\n"), r.stderr
