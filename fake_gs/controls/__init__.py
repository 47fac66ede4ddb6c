"""What an operator of the fake turns on around the contract, not the contract itself.

``faults`` are injected failures consulted before each service request; the variations
(``--variation NAME``: the table's rows, and ``seams``, where each acts) are named,
deliberate violations of the contract that prove the conformance suite has teeth;
``traffic`` logs each account's requests for client teams' plumbing gates. (Recording a
parity tape of the traffic received is ``fake_gs.http.recording``'s: it wraps the app.)

May import: ``contract`` only; every other part of the fake may import it.
"""
