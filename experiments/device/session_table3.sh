#!/usr/bin/env bash
# Device calls of issue 34, item 4: Table 3 with 5 seeds and the learning-rate grid
# (table3_5seeds_jobs.txt, 60 runs of 1000 rounds), resumable across calls.
#   A call runs the job file through run_jobs.sh (PARALLEL at a time, in the file's order) until
#   its deadline. Finished runs (summary.json) come back without their checkpoint; unfinished
#   ones with it, so the next call, given the previous results as .devresume/table3.tar.gz,
#   reuses the finished runs and resumes the others (`reproduce` does both).
# Needs the wheels in .whl/ and cifar10_jpeg/ in .devdata/ (carried, see README.md), and for a
# later call .devresume/ too. Results: $OUT/table3.tar.gz (split into 15 MB parts if larger).
# usage: session_table3.sh SECONDS [PARALLEL]
# A dry run on a CPU: DEVICE=cpu EXTRA="--set rounds=2" PY=.venv/bin/python OUT=DIR \
#   JOBS=FILE session_table3.sh 300 2
set -u
limit=${1:-520} par=${2:-15}
start=$(date +%s)
export DEVICE=${DEVICE:-cuda} PY=${PY:-python3}
jobs=${JOBS:-experiments/device/table3_5seeds_jobs.txt}
if [ "$DEVICE" = cuda ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  nvidia-smi --query-gpu=name,memory.total --format=csv
fi
export PYTHONPATH=/tmp/site:$PWD/src FEDPRIVACY_DATA=$PWD/.devdata
res=/tmp/res-$$; mkdir -p "$res/table3"
if [ -f .devresume/table3.tar.gz ]; then
  tar xzf .devresume/table3.tar.gz -C "$res/table3" && echo "resumed from .devresume"
fi
left=$(( limit - ($(date +%s) - start) - 25 ))
bash experiments/device/run_jobs.sh "$jobs" "$res/table3" "$left" "$par" > "$res/table3/run.log" 2>&1
echo "stopped after $(( $(date +%s) - start )) s"; cat "$res/table3/run.log"
for done in $(find "$res/table3" -name summary.json); do rm -f "$(dirname "$done")/checkpoint.pt"; done
echo "finished runs: $(find "$res/table3" -name summary.json | wc -l); unfinished with a checkpoint: $(find "$res/table3" -name checkpoint.pt | wc -l)"
tar czf "$res/table3.tar.gz" -C "$res/table3" .
if [ "$(stat -c %s "$res/table3.tar.gz")" -gt 15000000 ]; then
  split -b 15M -d "$res/table3.tar.gz" "$OUT/table3.tar.gz.part"  # cat the parts to rejoin
else
  cp "$res/table3.tar.gz" "$OUT/"
fi
ls -la "$OUT"
