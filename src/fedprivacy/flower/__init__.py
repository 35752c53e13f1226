"""The pipeline on Flower: a real deployment (SuperLink, SuperNodes, TLS) and Ray simulation.

The server runs the pipeline's round loop (:class:`fedprivacy.flower.training.DeployedTraining`:
selection, availability, ledger, privacy report) and sends every stage of a round as messages
(:mod:`fedprivacy.flower.transport`, :mod:`fedprivacy.flower.grid`); each node trains its own
data and runs the secure aggregation client (:mod:`fedprivacy.flower.node`), its protocol state
kept on the node between stages. :mod:`fedprivacy.flower.apps` is the Flower App (Message API),
:mod:`fedprivacy.flower.deploy` a local deployment with ``fedprivacy flower deploy``,
:mod:`fedprivacy.flower.reference` the in-process run a deployment is compared with, and
:mod:`fedprivacy.flower.tls` its certificates. Importing this package does not import Flower
(``fedprivacy[flower]``); ``apps``, ``grid`` and ``deploy`` do.
"""
