#!/usr/bin/env bash
# One device call of issue 34, item 3 (2026-11-28): Table 4 non-IID at lr 0.003 with 5 seeds
# (table4_noniid_lr0003_jobs.txt, 30 runs of 500 rounds), PARALLEL at a time on one GPU, stopped at
# the deadline; the run directories come back without their model checkpoints.
# Needs the wheels in .whl/ and mnist/ in .devdata/ (carried, see README.md).
# usage: session_2026-11-28.sh SECONDS [PARALLEL]; results in $OUT/results.tar.gz
# A dry run on a CPU: DEVICE=cpu EXTRA="--set rounds=2" PY=.venv/bin/python OUT=DIR session_2026-11-28.sh 120 2
set -u
limit=${1:-520} par=${2:-15}
start=$(date +%s)
export DEVICE=${DEVICE:-cuda} PY=${PY:-python3}
if [ "$DEVICE" = cuda ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  nvidia-smi --query-gpu=name,memory.total --format=csv
  nproc
fi
export PYTHONPATH=/tmp/site:$PWD/src FEDPRIVACY_DATA=$PWD/.devdata
res=/tmp/res-$$; mkdir -p "$res/logs"
$PY -c "import fedprivacy.cli.main, dp_accounting, opacus, torch; print('imports ok', torch.__version__, torch.cuda.is_available())" || exit 1
left=$(( limit - ($(date +%s) - start) - 15 ))
bash experiments/device/run_jobs.sh experiments/device/table4_noniid_lr0003_jobs.txt \
  "$res/table4" "$left" "$par" > "$res/logs/table4.log" 2>&1
echo "stopped after $(( $(date +%s) - start )) s"; cat "$res/logs/table4.log"
find "$res/table4" -name '*.pt' -delete
tar czf "$OUT/results.tar.gz" -C "$res" .
ls -la "$OUT"
