"""What the fake keeps: jobs, requests, checkpoints, logs, and how long it keeps them.

``store`` is the facade the handlers, the admin API and tests call (its ``dump`` is the
admin's view of it all); the routes' backends, one method per route with its rules and its
work beside the state it changes, are ``jobs`` (the control plane), ``checkpoints``,
``training``, ``sampling``, ``operations`` and ``statements`` (the execution-log SQL
statement); ``outward`` is what it
asks of the answer side (the ids it mints,
the form its results take); ``job_table`` admits
jobs against GPU capacity and walks their lifecycle; ``request_queue`` runs asynchronous
requests on each job's serial ``executor``; ``records`` are the plain records kept;
``result_retention`` frees a finished result once read; ``rules`` are the rules the
border and the backends ask (body limit, content type, an ended job's refusal, every rule
a variation may waive or bend); ``create_rules`` are the
create-time rules; ``quotas`` cap what one account keeps; ``execution_logs`` and
``log_stage`` are the S3 stage of spec §12.2 (``moto_account``: every moto internal it
takes, and moto's public API when they are gone).

May import: ``fake_gs.chunking``, ``fake_gs.engines``, ``fake_gs.answers.render``, ``check``
and ``delivery`` (never the answer shapes: the store is handed them, ``outward``),
``fake_gs.controls`` and ``contract``; never ``fake_gs.http``.
"""
