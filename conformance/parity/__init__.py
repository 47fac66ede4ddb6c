"""Parity: replay a recorded run (a tape) against another target and report every
difference (``gs-parity``). Tapes are written by ``gs-conformance --record``, the pytest
option ``--gs-record`` and ``fake-gs --record``; their format is ``contract.tape``."""
