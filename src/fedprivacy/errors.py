"""Typed errors raised by fedprivacy."""

from __future__ import annotations


class FedPrivacyError(Exception):
    """Base class of every error raised on purpose by fedprivacy."""


class ParameterError(FedPrivacyError, ValueError):
    """A parameter is outside its allowed range.

    Parameters
    ----------
    name : str
        The name of the offending parameter, as the caller spelled it.
    message : str
        What is wrong and what is allowed.
    """

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(f"{name}: {message}")
