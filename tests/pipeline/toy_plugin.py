"""``FEDPRIVACY_PLUGINS=toy_plugin``: the toy mechanism of ``test_seams.py``, registered.

What an operator's plugin is (:mod:`fedprivacy.plugins`): a module that registers its classes
when a process imports it. ``test_seams_deployed.py`` puts this folder on ``PYTHONPATH`` and
names this module for every process of a real deployment.
"""

from test_seams import NAME, Normalise

from fedprivacy.fl.mechanism import MECHANISMS

MECHANISMS.register(NAME, Normalise)
