"""The client's retry and poll policies wait along the kit's one curve (contract.limits)."""

from __future__ import annotations

from contract.limits import PollPolicy, RetryPolicy, WaitCurve


def test_a_poll_policy_is_a_wait_curve_with_a_timeout() -> None:
    poll = PollPolicy()
    assert isinstance(poll, WaitCurve) and poll.timeout_s == 1800.0
    assert [poll.delay(n) for n in (0, 1, 40)] == [0.5, 0.625, 6.0]  # 0.5 s, x1.25, capped at 6 s


def test_a_retry_policy_backs_off_along_its_curve() -> None:
    retry = RetryPolicy(backoff_first_s=1.0, backoff_factor=3.0, backoff_cap_s=5.0)
    assert retry.curve == WaitCurve(1.0, 3.0, 5.0)
    assert [retry.delay(n) for n in range(3)] == [1.0, 3.0, 5.0]
    assert [RetryPolicy().delay(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 6.0, 6.0]
