"""What server and nodes say to each other, and how it travels.

Each stage's records (``stages``), a node's signed claim to its user (``identity``), the
nodes' joint draw (``joint_draw``), the noise a round asks for (``noise_request``), one
exchange with the event log (``exchange``), and the transports: in process and over Flower's
grid (``transport``, ``grid``).
"""
