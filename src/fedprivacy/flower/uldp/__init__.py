"""ULDP-FL across silos on Flower.

The silo's node and policy (``silo_node``, ``silo_policy``), the server's rounds of the
private weighting protocol (``silo_rounds``, ``cross_silo``), the run directory
(``cross_silo_outputs``) and the comparison in the clear (``cross_silo_reference``).
"""
