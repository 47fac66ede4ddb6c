"""Hardening (issue 12): one account cannot block another, the admin API is the admin's,
bodies and results are bounded, input over a decided bound is refused with the limit named.

Most of these are decided rules of the fake (a shared fake must stay fair and bounded);
they run on embedded-fake variants and skip against a real URL, which may bound otherwise.
"""

from __future__ import annotations

from typing import Any

from conformance import bodies
from conformance.checks import refused
from conformance.driver_raw import RawDriver
from conformance.properties.test_limits import _open_group
from conformance.variants import variant_job
from conformance.verdict import Soft, expect
from contract.clauses import checks
from contract.models_catalog import TRAINING_MODELS

KiB = 1024


def _job_of(driver: RawDriver) -> str:
    body = bodies.job(bodies.training(TRAINING_MODELS[0]), bodies.sampling(TRAINING_MODELS[0]))
    job_id = driver.create_job(body).field("job_id")
    driver.wait_job(job_id, timeout_s=30)
    return str(job_id)


@checks("LIMIT-ACCOUNT-1")
def test_one_account_at_its_caps_does_not_block_another(gs_variant: Any) -> None:
    """Account A fills its own share of the chunk buffer; account B's upload still goes in."""
    target = gs_variant("account-caps", max_buffered_bytes_per_account=256 * KiB,
                        max_buffered_bytes_total=384 * KiB)
    driver_a, ops_a = variant_job(target)
    driver_b = RawDriver(target, token=target.token2)
    job_b = _job_of(driver_b)
    opened_a: list[bytes] = []
    opened_b: list[bytes] = []
    soft = Soft()
    try:
        refusal = None
        for _ in range(6):
            ans = _open_group(driver_a, ops_a.job_id, size=100 * KiB, opened=opened_a)
            if not ans.ok:
                refusal = ans
                break
        expect("LIMIT-ACCOUNT-1", refusal is not None, "account A was never capped")
        assert refusal is not None
        refused(refusal, soft, "LIMIT-ACCOUNT-1", statuses=[413, 429])
        mine = _open_group(driver_b, job_b, size=100 * KiB, opened=opened_b)
        soft.expect("LIMIT-ACCOUNT-1", mine.ok,
                    f"account B's chunk 0 was refused while only account A is at its caps: {mine}")
    finally:
        for chunk in opened_a:
            driver_a.finish_group("forward_backward", ops_a.job_id, [chunk])
        for chunk in opened_b:
            driver_b.finish_group("forward_backward", job_b, [chunk])
        driver_b.close()
    soft.check()
