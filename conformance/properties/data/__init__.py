"""Properties of the data plane: training, checkpoints, sampling, operations, polling,
the wire format, request chunks and chunk groups, and the limits."""
