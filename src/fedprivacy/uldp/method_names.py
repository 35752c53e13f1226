"""The names of the ULDP-FL methods, importable without torch (the CLI lists them in ``--help``).

Examples
--------
>>> from fedprivacy.uldp.method_names import METHODS
>>> METHODS[:2]
('DEFAULT', 'ULDP-NAIVE')
"""

from __future__ import annotations

#: Method names, as in the paper.
METHODS: tuple[str, ...] = (
    "DEFAULT",
    "ULDP-NAIVE",
    "ULDP-GROUP-max",
    "ULDP-GROUP-median",
    "ULDP-GROUP-2",
    "ULDP-GROUP-8",
    "ULDP-AVG",
    "ULDP-AVG-w",
    "ULDP-AVG-s",
    "ULDP-AVG-ws",
    "ULDP-SGD",
    "ULDP-SGD-w",
    "ULDP-SGD-s",
    "ULDP-SGD-ws",
)
