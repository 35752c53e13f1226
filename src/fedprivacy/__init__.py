"""fedprivacy: privacy in federated learning across many rounds, users and silos."""

from fedprivacy.errors import FedPrivacyError, ParameterError

__all__ = ["FedPrivacyError", "ParameterError", "__version__"]
__version__ = "0.1.0"
