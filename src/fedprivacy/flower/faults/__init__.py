"""Fault injection: what a lying server or a malicious node sends instead.

A lying FedAvg server (``lying_server``), the cross-silo one (``silo_forge``), the
``--forge`` format they share (``forge``), a deployment's fault plan (``fault_plan``: kill,
replay, bad shares, forge, rerun) and a malicious node's wrong shares (``node_faults``).
"""
