"""User-level differential privacy in cross-silo federated learning (ULDP-FL).

One user's records may sit in several silos. :mod:`fedprivacy.uldp.allocators` links every
training record to a silo and a user (Section 5.1 of Kato et al., ULDP-FL); the resulting
:class:`~fedprivacy.uldp.allocation.Allocation` gives per-silo, per-user views of the records
(and :mod:`fedprivacy.uldp.shards` the per-silo training data grouped by user).
"""
