"""What the suite sends: valid JSON bodies to start from (and break on purpose), and the
hypothesis strategies for batches, prompts, sampling parameters and chunkings.

May import: ``contract`` only; the drivers and the properties use it.
"""
