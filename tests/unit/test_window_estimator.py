"""async-demand(auto): the window follows measured service time and round trip."""

from __future__ import annotations

from polybus.client.policies.balance import WindowEstimator, auto_window


def feed(est: WindowEstimator, service: float, rtt: float, n: int, depth: int) -> int:
    """Simulate a replica serving back to back with ``depth`` calls kept outstanding."""
    window = est.window
    for k in range(1, n + 1):
        done = k * service
        sent = done - rtt - depth * service  # in the system: a round trip and the work ahead
        window = est.observe(sent, depth, done)
    return window


def test_slow_calls_need_a_small_window() -> None:
    est = WindowEstimator()
    assert feed(est, service=0.010, rtt=0.0005, n=50, depth=2) <= 2


def test_tiny_calls_open_the_window() -> None:
    est = WindowEstimator()
    w = feed(est, service=0.00005, rtt=0.0005, n=200, depth=2)
    assert w >= 5
    assert est.service_s is not None and est.service_s < 0.001


def test_first_answer_sets_both_estimates() -> None:
    est = WindowEstimator()
    est.observe(sent_at=0.0, ahead=1, done_at=0.003)
    assert est.service_s == 0.003
    assert est.rtt_s == 0.0
    assert est.window == auto_window(0.0, 0.003)
