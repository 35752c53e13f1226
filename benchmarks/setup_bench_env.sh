#!/usr/bin/env bash
# Creates .venv-bench: fedprivacy plus Flower (flwr 1.42.0) for benchmarks/secagg.py.
# Flower is a benchmark-only dependency and never enters the project's own environment.
# flwr 1.42.0 asks for certifi>=2026.10.19, newer than the registry holds here, so its other
# requirements are installed first and flwr itself with --no-deps (certifi is irrelevant to the
# in-process protocol driver).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-bench
.venv-bench/bin/pip install -q --upgrade pip
.venv-bench/bin/pip install -q -e . certifi \
    'numpy>=1.26,<3' 'grpcio>=1.70,<2' 'grpcio-health-checking>=1.70,<2' 'protobuf>=5.28,<7' \
    'cryptography>=50,<51' 'pycryptodome>=3.18,<4' 'iterators>=0.0.2,<0.0.3' \
    'typer>=0.13,<0.21' 'uv>=0.13.5,<0.14' 'tomli>=2.0.1,<3' 'tomli-w>=1.0,<2' \
    'pathspec>=1.0.4,<2' 'prompt-toolkit>=3.0.52,<4' 'rich>=14,<15' 'pyyaml>=6.0.2,<7' \
    'requests>=2.33,<3' 'httpx>=0.28.1,<1' 'click>=8,<9' 'packaging>=24,<26' \
    'sqlalchemy[asyncio]>=2.0.45,<3' 'alembic>=1.18.1,<2' 'uvicorn[standard]>=0.49,<0.50' \
    'fastapi>=0.138,<0.139' 'starlette>=1.3.1,<1.4'
.venv-bench/bin/pip install -q --no-deps flwr==1.42.0
.venv-bench/bin/python -c "import flwr, fedprivacy; print('flwr', flwr.__version__, 'ready')"
