"""The resources the OpenAPI document's examples name, held by a fake started with
``--example-data`` (the generic-tool run: schemathesis' CLI on ``contract/openapi.json``).

The examples phase of such a tool sends each operation's documented examples first; with
these held, every operation answers 2xx there in every run, whatever the random phases after
it draw (contract.example_resources says which example names what). Off by default: the fake
then holds nothing at start, as the service does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contract.example_resources import (
    EXAMPLE_CANCEL_JOB_ID,
    EXAMPLE_CHECKPOINT_ID,
    EXAMPLE_DELETE_CHECKPOINT_ID,
    EXAMPLE_JOB_ID,
    EXAMPLE_REQUEST_ID,
    SAMPLE_JOB,
)
from contract.models import CreateJobRequest
from fake_gs.http.auth import ANONYMOUS
from fake_gs.state.backends.training import save_result
from fake_gs.state.records import CheckpointRec, JobRec

if TYPE_CHECKING:
    from fake_gs.state.store import Store

_CHECKPOINT_TYPE = "resumable"


def hold_example_data(store: Store) -> None:
    """Create the example jobs (running at once under the default start-up, owned by the
    first ``--token``, else by the anonymous caller), the example job's two checkpoints,
    and its example request: a save of the checkpoint the load and export examples name
    (made here too, so those find it however soon they come)."""
    owner = store.settings.tokens[0] if store.settings.tokens else ANONYMOUS
    job = _register(store, owner, EXAMPLE_JOB_ID)
    _register(store, owner, EXAMPLE_CANCEL_JOB_ID)
    for checkpoint_id in (EXAMPLE_CHECKPOINT_ID, EXAMPLE_DELETE_CHECKPOINT_ID):
        _save(store, job, checkpoint_id)
    store.queue.submit(job, "save", lambda: _save(store, job, EXAMPLE_CHECKPOINT_ID), request_id=EXAMPLE_REQUEST_ID)
    _import_the_exporter()


def _import_the_exporter() -> None:
    """Import the export's serialiser (safetensors over torch: seconds on a busy machine)
    now, not inside the example export, which a tool gives a request timeout (schemathesis:
    10 s; a run on a loaded machine once hit it)."""
    try:
        import safetensors.torch  # noqa: F401
    except ImportError:  # a fake without torch: its exports fail either way
        pass


def _register(store: Store, owner: str, job_id: str) -> JobRec:
    """A job of the document's sample body under ``job_id``, known to the engine."""
    body = CreateJobRequest.model_validate(SAMPLE_JOB)
    job = store.table.new_job(owner, body, job_id)
    store.engine.create_job(job.job_id, list(body.sub_job_configs), job.seed, [s.sub_job_id for s in job.sub_jobs])
    store.table.register_job(job)
    return job


def _save(store: Store, job: JobRec, checkpoint_id: str) -> dict[str, Any]:
    """Save ``job``'s training sub-job as ``checkpoint_id``; the save's result as a poll shows it."""
    training = next(sub for sub in job.sub_jobs if sub.job_type == "training")
    snapshot = store.engine.save(job.job_id, _CHECKPOINT_TYPE)
    store.table.add_checkpoint(job, CheckpointRec(checkpoint_id, job.global_steps, job.last_loss, store.clock.time(),
                                            _CHECKPOINT_TYPE, snapshot, training.config.n_gpus))
    return save_result(job.public_id, checkpoint_id, _CHECKPOINT_TYPE, job.global_steps)
