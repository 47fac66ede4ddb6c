"""Properties of the control plane: addressing, auth, jobs and their validation, capacity,
cancel, the end of a job's life, error envelopes and execution logs."""
