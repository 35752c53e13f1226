"""Federated learning: models, flat-parameter helpers, local training and aggregation."""
