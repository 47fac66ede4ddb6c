"""Sub-job ids have one home (``contract.ids``): the fake builds them, the client and the
create rules parse them, the suite predicts them, all with the same two functions."""

from __future__ import annotations

from contract.ids import job_of_sub_job, sub_job_ids


def test_ids_count_each_type_from_zero_in_create_order() -> None:
    types = ["training", "sampling", "log_probability", "sampling"]
    assert sub_job_ids("j1", types) == ["j1:training:0", "j1:sampling:0", "j1:log_prob:0", "j1:sampling:1"]


def test_every_built_id_parses_back_to_its_job() -> None:
    for sid in sub_job_ids("a-b", ["training", "log_probability", "log_probability"]):
        assert job_of_sub_job(sid) == "a-b"


def test_anything_but_a_complete_id_parses_to_none() -> None:
    for value in (None, 7, "", "j1", "j1:training", "j1:log_probability:0", "j1:training:01", ":training:0"):
        assert job_of_sub_job(value) is None
