"""Route name (``contract.routes``) -> handler coroutine; the app wires one to the other."""

from __future__ import annotations

from fake_gs.http.handlers import checkpoints, jobs, operations, polling, sampling, training

#: Each a :data:`fake_gs.http.handlers.context.Handler`.
HANDLERS = {
    "create_job": jobs.create_job,
    "list_jobs": jobs.list_jobs,
    "get_capacity": jobs.get_capacity,
    "get_job": jobs.get_job,
    "cancel_job": jobs.cancel_job,
    "get_experiment_run": jobs.get_experiment_run,
    "list_checkpoints": checkpoints.list_checkpoints,
    "export_checkpoint": checkpoints.export_checkpoint,
    "delete_checkpoint": checkpoints.delete_checkpoint,
    "forward_backward": training.forward_backward,
    "forward_no_grad": training.forward_no_grad,
    "step": training.step,
    "save": training.save,
    "load": training.load,
    "generate": sampling.generate,
    "generate_stream": sampling.generate_stream,
    "log_probs": sampling.log_probs,
    "operation": operations.operation,
    "get_request": polling.get_request,
}
