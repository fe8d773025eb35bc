"""What `polybus --help` says a command does is what it does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polybus.cli.main import COMMANDS, main
from polybus.testing.apps import write_one_call_app


def test_check_help_says_it_imports_the_modules(capsys: pytest.CaptureFixture[str]) -> None:
    # check runs each module's top-level code (in a child process): "without starting
    # anything" let a user think their code would not run.
    assert "import each module in a child process" in COMMANDS["check"]
    assert "--no-import" in COMMANDS["check"]
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "child process" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv", [
    ["run", "app.toml", "--json", "{missing}/run.json"],
    ["sweep", "app.toml", "--vary", "modules.server.replication=1,2", "--csv",
     "{missing}/sweep.csv"],
])
def test_an_output_file_that_cannot_be_written_is_refused_before_the_run(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It was a FileNotFoundError traceback after the whole run had been paid for.
    app = write_sort_like_app(tmp_path)
    missing = tmp_path / "no-such-dir"
    argv = [a.replace("app.toml", str(app)).format(missing=missing) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    option = "--json" if "--json" in argv else "--csv"
    assert f"polybus {argv[0]}: error: {option} {missing}/" in err
    assert f"directory {missing} does not exist" in err


def write_sort_like_app(where: Path) -> Path:
    return write_one_call_app(where)


@pytest.mark.parametrize("argv", [
    ["run", "app.toml", "--json", "{name}.json"],
    ["sweep", "app.toml", "--vary", "modules.server.replication=1,2", "--csv", "{name}.csv"],
    ["sweep", "app.toml", "--vary", "modules.server.replication=1,2", "--csv",
     "{name}/s.csv"],
])
def test_a_file_name_too_long_is_a_usage_error_not_a_traceback(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The check itself raised OSError (File name too long) out of Path.is_dir.
    app = write_sort_like_app(tmp_path)
    name = str(tmp_path / ("a" * 300))
    argv = [a.replace("app.toml", str(app)).format(name=name) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"polybus {argv[0]}: error: --" in err
    assert err.rstrip().endswith("cannot be written: File name too long")


@pytest.mark.parametrize("under", ["s.json/x.csv", "s.json/deeper/x.csv"])
def test_a_file_where_a_directory_should_be_is_named_as_not_a_directory(
        under: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # It said "directory s.json does not exist", of a file that does.
    app = write_sort_like_app(tmp_path)
    (tmp_path / "s.json").write_text("{}")
    csv = tmp_path / under
    assert main(["sweep", str(app), "--vary", "modules.server.replication=1,2",
                 "--csv", str(csv)]) == 2
    assert (f"polybus sweep: error: --csv {csv}: {tmp_path / 's.json'} is not a directory"
            in capsys.readouterr().err)


def test_a_bad_listen_is_blamed_on_listen(capsys: pytest.CaptureFixture[str]) -> None:
    # serve said "--set: serve.listen: expected a string, got an integer 8080", and
    # registry "bad address 'tcp://8080'": neither was what the user wrote.
    assert main(["serve", "examples/rudy/app.toml", "--listen", "8080"]) == 2
    assert ("polybus serve: error: --listen '8080': expected HOST:PORT, e.g. 127.0.0.1:8080"
            in capsys.readouterr().err)
    assert main(["registry", "--listen", "8080"]) == 2
    assert ("polybus registry: error: --listen '8080': expected HOST:PORT"
            in capsys.readouterr().err)


@pytest.mark.parametrize(("argv", "what"), [
    (["registry", "--listen", "inproc://reg"], "a registry"),
    (["worker", "--registry", "127.0.0.1:9", "--module", "examples/sort/server.py",
      "--listen", "inproc://w"], "a worker"),
])
def test_an_inproc_listen_is_refused_by_a_process_others_dial(
        argv: list[str], what: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """inproc:// reaches only listeners of the dialling process: a registry or worker
    listening there could never be reached, so it is not started."""
    monkeypatch.setenv("POLYBUS_TOKEN", "t" * 32)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (f"polybus {argv[0]}: error: --listen '{argv[argv.index('--listen') + 1]}': an "
            "inproc:// address is reached only from within the process that listens (tests); "
            f"{what} is dialled from other processes") in err, err


@pytest.mark.parametrize("argv", [["registry", "--ttl", "-1"],
                                  ["worker", "--registry", "127.0.0.1:9", "--heartbeat", "0"]])
def test_a_duration_that_is_not_positive_is_refused(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # --ttl -1 dropped every worker as it registered ("no replica ... registered");
    # --heartbeat 0 spun a CPU at 100 %.
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "expected a duration > 0 (" in err and f"got '{argv[-1]}'" in err, err


def test_a_worker_heartbeat_shorter_than_a_configuration_takes_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    # --heartbeat 1us was taken: the worker spun on heartbeats, about 35 % of a CPU
    # (and its registry's), where [cluster] heartbeat refuses less than 10 ms
    with pytest.raises(SystemExit) as info:
        main(["worker", "--registry", "127.0.0.1:9", "--heartbeat", "1us"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert ("argument --heartbeat: a heartbeat of '1us' is too short to keep (from '10ms' "
            "to '24h', as [cluster] heartbeat)") in err, err


def test_a_duration_on_the_command_line_is_written_as_in_the_configuration() -> None:
    from polybus.cli.main import build_parser

    args = build_parser().parse_args(["registry", "--ttl", "1500ms"])
    assert args.ttl == 1.5
    args = build_parser().parse_args(["worker", "--registry", "127.0.0.1:9", "--heartbeat", "2"])
    assert args.heartbeat == 2.0


def test_a_duration_that_is_not_one_says_what_is_expected(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["registry", "--ttl", "soon"])
    assert ("expected a duration > 0 (a number of seconds or a string such as '250us', '1ms', "
            "'5s', '2m'), got 'soon'") in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["registry", "--listen", "127.0.0.1:99999"],
    ["worker", "--registry", "127.0.0.1:99999", "--module", "examples/sort/server.py"],
    ["worker", "--registry", "127.0.0.1:9", "--module", "examples/sort/server.py",
     "--listen", "tcp://127.0.0.1:70000"],
    ["run", "examples/sort/app.toml", "--registry", "127.0.0.1:99999"],
    ["worker", "--registry", "127.0.0.1:9", "--module", "examples/sort/server.py",
     "--listen", "tcp://127.0.0.1:\u0663"],  # (an Arabic-Indic 3 was read as port 3)
])
def test_a_port_over_65535_is_a_usage_error_not_a_traceback(
        argv: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # bind() and connect() raised a bare OverflowError ("port must be 0-65535").
    monkeypatch.setenv("POLYBUS_TOKEN", "t" * 32)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "OverflowError" not in err, err
    assert f"polybus {argv[0]}: error: " in err
    assert "65535" in err or "expected HOST:PORT or tcp://HOST:PORT" in err, err
    # (a registry's port is 1 <= PORT <= 65535, as [cluster] registry says it: its own)
    assert ("0-65535" in err or "1 <= PORT <= 65535" in err) == any(
        ":99999" in a or ":70000" in a for a in argv), err
    import sys

    assert "polybus_user_server" not in sys.modules  # (refused before the module loads)


def test_a_plot_without_matplotlib_names_the_extra(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # rich took "[plot]" for markup: the hint read "(pip install polybus)". (A warning
    # line on stderr now, naming the file not written.)
    import argparse
    import io

    from rich.console import Console

    from polybus.bench import plots, registry
    from polybus.bench.report import BenchResult, Row
    from polybus.bench.stats import summarize
    from polybus.cli import cmd_bench

    def fake_run(name: str, quick: bool = False, progress: object = None) -> BenchResult:
        r = BenchResult(name)
        r.rows.append(Row.of("polybus", {}, 1, "seconds", summarize([1.0])))
        return r

    def no_matplotlib(*_: object) -> None:
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(registry, "run", fake_run)
    monkeypatch.setattr(plots, "plot", no_matplotlib)  # (cmd_bench's: bench/plots.py)
    out = io.StringIO()
    args = argparse.Namespace(json=None, plot=str(tmp_path / "p.png"), out=None, quick=True,
                              name="latency")
    assert cmd_bench._run_one("latency", args, Console(file=out, width=200))
    err = capsys.readouterr().err
    assert (f"polybus bench: warning: {tmp_path / 'p.png'} not written: matplotlib did not "
            "import (No module named 'matplotlib'); pip install 'polybus[plot]' for it\n"
            ) in err, err


@pytest.mark.parametrize("where", ["/proc/polybus-x.csv", "/sys/polybus-x.csv"])
def test_an_output_no_write_can_make_is_refused_before_the_run(
        where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # /proc is a directory that os.access calls writable (always, for root): the check
    # passed and the file failed only at the end, after every run.
    app = write_sort_like_app(tmp_path)
    assert main(["sweep", str(app), "--vary", "modules.server.replication=1,2",
                 "--csv", where]) == 2
    assert f"polybus sweep: error: --csv {where}: cannot be written: " in capsys.readouterr().err
    assert not Path(where).exists()


def test_the_check_of_a_new_output_leaves_no_file_and_an_old_one_unchanged(
        tmp_path: Path) -> None:
    from polybus.cli.values import check_writable

    new = tmp_path / "new.json"
    check_writable(str(new), "--json")
    assert not new.exists()
    old = tmp_path / "old.json"
    old.write_text("kept")
    check_writable(str(old), "--json")
    assert old.read_text() == "kept"


@pytest.mark.parametrize("option", ["--page", "--out"])
def test_a_bench_page_or_out_under_a_name_too_long_is_a_usage_error(
        option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Path.is_dir raised OSError (File name too long) out of the page's checks.
    long = tmp_path / ("a" * 300)
    argv = ["bench", "latency", "--quick", "--out", str(tmp_path / "r")]
    if option == "--page":
        argv += ["--page", str(long / "x.md")]
    else:
        argv[argv.index("--out") + 1] = str(long / "r")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"polybus bench: error: {option} {long}" in err
    assert err.rstrip().endswith("cannot be written: File name too long")


def test_the_check_neither_opens_a_fifo_nor_writes_through_a_link_to_nothing(
        tmp_path: Path) -> None:
    # The probe opened a FIFO for writing (it waited for a reader for ever, or a
    # reader saw its end), and made a dangling link's target, then removed the link.
    import os
    import threading

    from polybus.cli.values import check_writable

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    done = threading.Event()
    t = threading.Thread(target=lambda: (check_writable(str(fifo), "--json"), done.set()),
                         daemon=True)
    t.start()
    t.join(10)
    if not done.is_set():  # (unblock the probe, then fail)
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("the check opened the FIFO and waited for a reader")
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "nowhere" / "out.csv")
    check_writable(str(link), "--csv")
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_a_bench_out_that_is_a_loop_of_links_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert main(["bench", "--page-only", "--out", str(loop)]) == 2
    assert f"polybus bench: error: --out {loop}: cannot be written: " in capsys.readouterr().err


@pytest.mark.parametrize("written", ['"2m"', "'2m'", "2m", "120"])
def test_a_duration_may_be_written_as_a_toml_string_as_set_reads_it(written: str) -> None:
    # The README wrote `--timeout DURATION` as `60` or `"2m"`, as the configuration
    # writes durations; `--timeout '"2m"'` was refused ("expected a duration > 0").
    from polybus.cli.main import build_parser

    parse = build_parser().parse_args
    assert parse(["run", "app.toml", "--timeout", written]).timeout == 120.0
    assert parse(["sweep", "app.toml", "--vary", "a.b=1", "--timeout", written]).timeout == 120.0
    assert parse(["registry", "--ttl", written]).ttl == 120.0
    assert parse(["worker", "--registry", "127.0.0.1:9", "--heartbeat", written]).heartbeat \
        == 120.0


@pytest.mark.parametrize("bad", ['"soon"', '"2m', '"0"', '""', '"2m" x', "'-1s'", '"2m"\nv = 1'])
def test_a_quoted_duration_that_is_not_one_is_still_refused(
        bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    from polybus.cli.main import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["registry", "--ttl", bad])
    assert info.value.code == 2
    assert "expected a duration > 0 (" in capsys.readouterr().err


def test_a_file_another_probe_made_and_removed_meanwhile_is_still_writable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank of an mpi run checks the same --json at once: one rank's probe made the
    file and removed it between another's look (a regular file) and its open, which
    failed the run, "cannot be written: No such file or directory"."""
    from polybus.cli import values
    from polybus.cli.values import check_writable

    other = tmp_path / "made by another probe"
    other.write_text("")
    seen = os.stat(other)
    real_stat = os.stat

    def stat_then_gone(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).endswith("result.json"):
            return seen  # (as it was when looked at; it is gone when opened)
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(values.os, "stat", stat_then_gone)
    check_writable(str(tmp_path / "result.json"), "--json")
    assert not os.path.lexists(tmp_path / "result.json")  # (os.stat is the fake here)


def test_version_says_polybus_s_version(capsys: pytest.CaptureFixture[str]) -> None:
    # A new user's first command: it was "error: the following arguments are required:
    # COMMAND", exit status 2.
    import polybus

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"polybus {polybus.__version__}\n"
