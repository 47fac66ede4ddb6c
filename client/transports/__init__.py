"""Transports behind the ``client.transport`` seam: Cortex (REST) and recording (tests);
``jagged`` makes verl's nested batches dense before the Cortex transport encodes them."""
