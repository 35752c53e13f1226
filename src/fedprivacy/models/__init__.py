"""The model zoo: every neural network of the package, built by name from one registry.

:mod:`~fedprivacy.models.images` holds the image classifiers (the FedAvg experiments' networks
and the ULDP-FL MNIST CNN), :mod:`~fedprivacy.models.tabular` the tabular models of the ULDP-FL
experiments, and :mod:`~fedprivacy.models.registry` the one name -> builder registry with
:func:`~fedprivacy.models.registry.build_model`. Every model is a pure function of its
parameters (no buffers, no dropout), so clients and users can be trained with
:func:`torch.func.vmap` over stacked parameters.
"""
