"""engines/supervise.py: which ended workers start again, when, and what is said.

Driven by `Supervisor.step` with the time passed in and a stand-in engine: no process
is started (tests/integration/test_serve_restart.py starts real ones)."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest

from polybus.config import load
from polybus.engines.supervise import RESTART_MAX_S, RESTART_S, STABLE_S, Supervisor
from polybus.errors import ConfigError


class _Proc:
    def __init__(self, code: int | None = None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


class _Engine:
    """What a Supervisor uses of a LocalEngine: procs, lock, respawn."""

    def __init__(self, tmp: Path, names: list[str]) -> None:
        self.lock = threading.Lock()
        self.procs: list[tuple[str, Any, Path]] = []
        for n in names:
            log = tmp / f"{n}.log"
            log.write_text(f"polybus worker {n}: serving\nsomething went wrong\n")
            self.procs.append((n, _Proc(), log))
        self.respawned: list[str] = []
        self.fail: OSError | None = None

    def end(self, name: str, code: int) -> None:
        for n, p, _ in self.procs:
            if n == name:
                p.code = code

    def respawn(self, name: str) -> bool:
        if self.fail is not None:
            raise self.fail
        self.respawned.append(name)
        for i, (n, _, log) in enumerate(self.procs):
            if n == name:
                self.procs[i] = (n, _Proc(), log)
        return True


def _sup(tmp_path: Path, names: list[str] = ["web-0", "web-1"],  # noqa: B006
         first: float = RESTART_S) -> tuple[Supervisor, _Engine, io.StringIO]:
    engine = _Engine(tmp_path, names)
    out = io.StringIO()
    sup = Supervisor(engine, out, first)  # type: ignore[arg-type]  # (not started: stepped here)
    return sup, engine, out


def test_a_worker_that_ended_starts_again_after_the_first_pause(tmp_path: Path) -> None:
    sup, engine, out = _sup(tmp_path)
    t0 = min(w.started for w in sup.watches.values())
    sup.step(t0 + 1)
    assert engine.respawned == [] and out.getvalue() == ""  # none ended
    engine.end("web-1", -9)
    sup.step(t0 + 2)
    said = out.getvalue()
    assert ("polybus serve: worker web-1 was killed by signal 9 (SIGKILL); its log ends: "
            f"something went wrong; starting it again in {RESTART_S:g} s") in said
    assert engine.respawned == []
    sup.step(t0 + 2 + RESTART_S / 2)
    assert engine.respawned == []  # not before its pause is over
    sup.step(t0 + 2 + RESTART_S)
    assert engine.respawned == ["web-1"]
    assert out.getvalue().endswith("polybus serve: worker web-1 started again (restart 1)\n")
    sup.step(t0 + 3)
    assert engine.respawned == ["web-1"]  # running again: nothing more


def test_a_worker_that_keeps_ending_waits_twice_as_long_each_time_up_to_the_bound(
        tmp_path: Path) -> None:
    sup, engine, out = _sup(tmp_path, ["web-0"])
    now = sup.watches["web-0"].started
    pauses = []
    for _ in range(9):
        engine.end("web-0", 1)
        now += 0.1
        sup.step(now)  # seen ended: its pause planned
        pauses.append(sup.watches["web-0"].due - now)  # type: ignore[operator]
        now += pauses[-1]
        sup.step(now)
    assert pauses[:4] == [RESTART_S, 2 * RESTART_S, 4 * RESTART_S, 8 * RESTART_S]
    assert max(pauses) == RESTART_MAX_S and pauses[-1] == RESTART_MAX_S
    assert engine.respawned == ["web-0"] * 9
    assert "exited with status 1" in out.getvalue()


def test_a_worker_that_ran_long_before_it_ended_gets_the_first_pause_again(
        tmp_path: Path) -> None:
    sup, engine, _ = _sup(tmp_path, ["web-0"])
    w = sup.watches["web-0"]
    now = w.started
    for _ in range(3):  # three quick ends: the pause grew
        engine.end("web-0", 1)
        sup.step(now := now + 0.1)
        sup.step(now := now + w.pause)
    assert w.pause == 8 * RESTART_S
    engine.end("web-0", 1)
    sup.step(now := now + STABLE_S + 1)
    assert w.due == pytest.approx(now + RESTART_S)


def test_nothing_starts_again_once_stopped(tmp_path: Path) -> None:
    sup, engine, _ = _sup(tmp_path)
    now = sup.watches["web-0"].started
    engine.end("web-0", 1)
    sup.step(now + 1)
    sup.stop()
    sup.step(now + 10)
    assert engine.respawned == []


def test_a_start_that_fails_is_said_and_tried_again_later(tmp_path: Path) -> None:
    sup, engine, out = _sup(tmp_path, ["web-0"])
    now = sup.watches["web-0"].started
    engine.end("web-0", 1)
    engine.fail = OSError(24, "Too many open files")
    sup.step(now := now + 1)
    sup.step(now := now + RESTART_S)
    assert "worker web-0 could not be started again: [Errno 24] Too many open files" \
        in out.getvalue()
    engine.fail = None
    sup.step(now := now + 0.1)  # seen ended again: a longer pause
    assert sup.watches["web-0"].due == pytest.approx(now + 2 * RESTART_S)
    sup.step(now + 2 * RESTART_S)
    assert engine.respawned == ["web-0"]


def _served(tmp_path: Path) -> str:
    """A served module's app.toml written in ``tmp_path``; its text, to vary."""
    (tmp_path / "web.py").write_text("def page():\n    return 'hi'\n")
    base = ('[modules.web]\nsource = "web.py"\n[serve]\nlisten = "127.0.0.1:0"\n'
            '[serve.routes]\n"GET /" = "web.page"\n')
    (tmp_path / "app.toml").write_text(base)
    return base


def test_serve_restart_is_on_unless_turned_off(tmp_path: Path) -> None:
    base = _served(tmp_path)
    spec = load(tmp_path / "app.toml").serve
    assert spec is not None and spec.restart is True
    (tmp_path / "app.toml").write_text(base.replace("[serve]\n", "[serve]\nrestart = false\n"))
    spec = load(tmp_path / "app.toml").serve
    assert spec is not None and spec.restart is False
    (tmp_path / "app.toml").write_text(base.replace("[serve]\n", '[serve]\nrestart = "yes"\n'))
    with pytest.raises(ConfigError, match=r"serve\.restart"):
        load(tmp_path / "app.toml")


def test_a_worker_that_exits_cleanly_is_said_once_and_not_started_again(
        tmp_path: Path) -> None:
    # serve's process group SIGTERMed as it stops (systemd's default), or an operator
    # stopping one worker: its status is 0, and it was started again regardless.
    sup, engine, out = _sup(tmp_path)
    now = sup.watches["web-0"].started
    engine.end("web-0", 0)
    for k in range(5):
        sup.step(now + 1 + k * RESTART_MAX_S)
    assert engine.respawned == []
    assert out.getvalue().count("worker web-0 exited with status 0") == 1
    assert "it ended cleanly, so it is not started again" in out.getvalue()


def test_failed_starts_back_off_even_after_a_long_run(tmp_path: Path) -> None:
    # A worker that had run a minute got the first pause again after every failed
    # start: a start tried every 0.7 s for ever, two lines each time.
    sup, engine, _ = _sup(tmp_path, ["web-0"])
    w = sup.watches["web-0"]
    now = w.started + STABLE_S + 1
    engine.end("web-0", 1)
    engine.fail = OSError(24, "Too many open files")
    pauses = []
    for _ in range(4):
        sup.step(now)  # seen ended: a pause planned
        assert w.due is not None
        pauses.append(w.due - now)
        now = w.due
        sup.step(now)  # the start fails
    assert pauses == [RESTART_S, 2 * RESTART_S, 4 * RESTART_S, 8 * RESTART_S]


def test_nothing_starts_again_once_halted(tmp_path: Path) -> None:
    sup, engine, _ = _sup(tmp_path)
    now = sup.watches["web-0"].started
    engine.end("web-0", 1)
    sup.step(now + 1)
    sup.halt()
    sup.step(now + 10)
    assert engine.respawned == []


def test_a_look_that_raises_does_not_end_the_watching_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The thread that started a worker again must outlive it (PR_SET_PDEATHSIG).
    import time

    sup, engine, out = _sup(tmp_path, ["web-0"])
    calls = {"n": 0}
    real = _Proc.poll

    def flaky(self: _Proc) -> int | None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a look went wrong")
        return real(self)

    engine.end("web-0", 1)
    monkeypatch.setattr(_Proc, "poll", flaky)
    try:
        sup.start()
        deadline = time.monotonic() + 20
        while not engine.respawned and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sup.stop()
    assert "could not look at the workers: RuntimeError('a look went wrong')" in out.getvalue()
    assert engine.respawned == ["web-0"]


def test_halt_leaves_the_thread_that_started_the_workers_until_stop(tmp_path: Path) -> None:
    # A worker started again ends when the thread that started it ends (PR_SET_PDEATHSIG):
    # halt (serve's first signal) ended the thread, and those workers with it, during the
    # grace of their requests in flight.
    sup, _, _ = _sup(tmp_path)
    sup.start()
    try:
        sup.halt()
        sup._thread.join(timeout=1.0)  # (it ended within a look, 0.1 s, when halt ended it)
        assert sup._thread.is_alive()
    finally:
        sup.stop()
    assert not sup._thread.is_alive()


def test_the_first_pause_is_serves_restart_pause(tmp_path: Path) -> None:
    """``[serve] restart_pause``: the first pause, doubled as RESTART_S is (it was 0.5 s
    whatever a worker's start cost or its program needed)."""
    sup, engine, out = _sup(tmp_path, ["web-0"], first=0.1)
    w = sup.watches["web-0"]
    now = w.started
    pauses = []
    for _ in range(3):
        engine.end("web-0", 1)
        sup.step(now := now + 0.01)
        assert w.due is not None
        pauses.append(w.due - now)
        sup.step(now := w.due)
    assert pauses == pytest.approx([0.1, 0.2, 0.4])
    assert "starting it again in 0.1 s" in out.getvalue()
    engine.end("web-0", 1)
    sup.step(now := now + STABLE_S + 1)  # (after a long run: the first pause again)
    assert w.due == pytest.approx(now + 0.1)


def test_serve_restart_pause_is_a_duration_up_to_the_longest_pause(tmp_path: Path) -> None:
    base = _served(tmp_path)
    spec = load(tmp_path / "app.toml").serve
    assert spec is not None and spec.restart_pause == RESTART_S
    (tmp_path / "app.toml").write_text(base.replace("[serve]\n",
                                                    '[serve]\nrestart_pause = "100ms"\n'))
    spec = load(tmp_path / "app.toml").serve
    assert spec is not None and spec.restart_pause == 0.1
    for bad in ('"0s"', '"1min"', "true"):
        (tmp_path / "app.toml").write_text(base.replace(
            "[serve]\n", f"[serve]\nrestart_pause = {bad}\n"))
        with pytest.raises(ConfigError, match=r"serve\.restart_pause"):
            load(tmp_path / "app.toml")
