"""User-level differential privacy in cross-silo federated learning (ULDP-FL).

One user's records may sit in several silos. :mod:`fedprivacy.uldp.allocation` links every
training record to a silo and a user (Section 5.1 of Kato et al., ULDP-FL) and gives per-silo,
per-user views of the records.
"""
