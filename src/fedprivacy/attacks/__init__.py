"""What an honest-but-curious server can reconstruct from the aggregates it observes."""

from fedprivacy.attacks.least_squares import (
    ReconstructionResult,
    least_squares_reconstruction,
    simulate_aggregates,
)

__all__ = ["ReconstructionResult", "least_squares_reconstruction", "simulate_aggregates"]
