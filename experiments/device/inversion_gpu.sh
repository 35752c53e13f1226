#!/usr/bin/env bash
# Fig. 9 gradient inversion on a GPU (issue 19/20): a timing probe, then more images of CIFAR-10.
# Needs the wheels in .whl/ and cifar10_jpeg/ + mnist/ in .devdata/ (carried; see README.md here).
# usage: inversion_gpu.sh SECONDS
set -u
limit=${1:-240}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src FEDPRIVACY_DATA=$PWD/.devdata PYTHONUNBUFFERED=1
res=/tmp/inv; mkdir -p $res
start=$(date +%s)
python3 -m fedprivacy.cli.main reproduce attack-inversion --out $res/probe --quiet \
  --set device=cuda --set images=1 --set iterations=200 > $res/probe.md 2>&1
echo "probe (1 image, 200 iterations, both datasets): $(( $(date +%s) - start )) s"; cat $res/probe.md
left=$(( limit - ($(date +%s) - start) ))
timeout $left python3 -m fedprivacy.cli.main reproduce attack-inversion --out $res/gpu --quiet \
  --set device=cuda --set images=8 --set datasets=cifar10,mnist
echo "rc=$? after $(( $(date +%s) - start )) s"
cd $res && tar czf $OUT/inversion_gpu.tar.gz probe gpu 2>/dev/null; ls -la $OUT
