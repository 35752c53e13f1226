"""The FedAvg server over the nodes.

One round, plaintext or secure (``fedavg_round``, ``secure_round``, ``overlap``), the
pipeline's training over a transport (``training``) and the reference simulation
(``reference``).
"""
