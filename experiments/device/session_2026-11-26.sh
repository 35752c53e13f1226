#!/usr/bin/env bash
# One device call of issue 20 (2026-11-26): everything at once on one GPU, stopped at a deadline,
# results packed into $OUT/results.tar.gz (checkpoints included, so a later call can resume).
#   1. the Appendix G.2 attack at the paper's window (t0 = 1460, t1 = 1500), random and T = 2;
#   2. benchmarks/uldp.py --device cuda against the per-user loop and the authors' pipeline;
#   3. Table 4 non-IID at the smaller learning rates (table4_noniid_small_lr_jobs.txt).
# Needs: the wheels of what the image lacks in .whl/ and mnist/ + cifar10_jpeg/ in .devdata/
# (both carried, see experiments/device/README.md). usage: session_2026-11-26.sh SECONDS
set -u
limit=${1:-500}
start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src FEDPRIVACY_DATA=$PWD/.devdata PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
res=/tmp/res; mkdir -p $res/logs
nvidia-smi --query-gpu=name,memory.total --format=csv | tee $res/logs/gpu.txt
python3 -c "import fedprivacy.cli.main, dp_accounting, opacus, gmpy2, flint, phe, torch; print('imports ok', torch.__version__, torch.cuda.is_available())" || exit 1
if [ -d .devresume/attack ]; then cp -r .devresume/attack $res/; fi  # resume an earlier call
for run in random multiround-t2; do
  python3 -m fedprivacy.cli.main reproduce attack-cifar10 --only $run --out $res/attack \
    --set device=cuda > $res/logs/attack-$run.log 2>&1 &
done
( for b in loop authors; do
    timeout 240 python3 benchmarks/uldp.py --device cuda --baseline $b \
      > $res/logs/bench-uldp-$b.log 2>&1
  done ) &
left=$(( limit - ($(date +%s) - start) - 15 ))
bash experiments/device/run_jobs.sh experiments/device/table4_noniid_small_lr_jobs.txt \
  $res/table4 $left 10 > $res/logs/table4.log 2>&1 &
while [ $(( $(date +%s) - start )) -lt $(( limit - 10 )) ] && \
      pgrep -f "reproduce|benchmarks/uldp" > /dev/null; do sleep 5; done
pkill -f "fedprivacy.cli.main reproduce"; pkill -f benchmarks/uldp.py; sleep 2
echo "stopped after $(( $(date +%s) - start )) s"
tail -c 600 $res/logs/attack-*.log; cat $res/logs/table4.log; tail -n 30 $res/logs/bench-uldp-*.log
tar czf $OUT/results.tar.gz -C $res .
