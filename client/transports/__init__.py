"""Transports behind the seam of ``base`` (``Request`` in, a dict out): Cortex (REST) and recording (tests);
``jagged`` makes verl's nested batches dense before the Cortex transport encodes them."""
