#!/usr/bin/env bash
# benches/gpu/run.sh: what a GPU owner runs once, on the card, to see where its time goes, with
# the card, driver and date written beside every figure (issue 32: "whenever a GPU is at hand,
# run it"). The steps run in the order of what matters most, each within what is left of the
# budget, so a short budget loses the last ones. Everything lands in one folder:
#
#   machine.txt           the date (UTC), the card and driver (nvidia-smi, rocm-smi), `tradetune devices`
#   bench-gpu.txt         `tradetune bench gpu --configs rtx4080` on a fresh autotune cache: cold first
#                         updates, steady samples/s, launches, phase split, the probe (256², 1024²,
#                         4096²), GPU busy %; the PyTorch peer with --peer
#   study.txt             a study (study.toml) of the RTX 4080 preset's shape (256-step rollouts), two trials
#                         in one process on that cache: how long the first takes before it trains,
#                         whether the second's phase split agrees with the first's steady one, the
#                         verdict beside the card's busy % (two and a half minutes at most); study.db
#                         the study, study-trials.csv every trial attribute (study-export.txt its line)
#   bench-gpu-cached.txt  the RTX 4080 configuration again (f32) in a new process on the cache the
#                         first left: what the next trial of the same shapes pays before it trains;
#                         each run twice, its rollouts' policy step direct and replayed
#   *-spirv.*             with --spirv, the same binary built with `--features vulkan` (SPIR-V
#                         kernels, cooperative matrices): `bench matmul` (does the card offer them
#                         through Vulkan, and at what rate) and `bench gpu` for the RTX 4080 shape
#   bench-gpu-rx7900gre.txt  the RX 7900 GRE preset's shape, cold for its shapes, with the peer
#   bench-matmul.txt      `tradetune bench matmul --configs rtx4080`: every matmul routine on the
#                         update's products, which one autotune picks, the card's planes and
#                         cooperative matrices
#   bench-gpu-minibatches.txt  the RTX 4080 configuration, env on the device, f32, policy step
#                         replayed, its updates' minibatches direct and replayed
#   smoke.txt             the first small run on the card, before any step (below)
#   *.err                 each step's progress and errors; steps.txt what each step took
#
# Before any step it checks what would waste the run: wgpu's default adapter must be a GPU (not
# a software renderer, unless --allow-software), a --peer Python that cannot import torch and
# numpy or sees no GPU through torch is left out with a warning (the steps run without it), and
# a first small run on the card (the tiny configuration, env on the device, one update) must
# pass: where opening the device or compiling a kernel fails, the run stops there (exit 4) with
# its error, rather than every step failing the same way. Each `bench gpu` step gets a
# --deadline 45 s short of its limit, so that its matmul probe and notes are printed.
#
# Usage: benches/gpu/run.sh [--tradetune BIN] [--spirv BIN] [--peer PYTHON] [--out DIR]
#                           [--pack FILE] [--budget SECONDS] [--allow-software]
#   --tradetune  the binary (default: `tradetune` on PATH, else target/release/tradetune)
#   --spirv      a second binary, built with `cargo build --release -p tradetune --features vulkan`
#   --peer       a Python with torch for the CleanRL-style peer (benches/peers/README.md)
#   --out        the folder (default gpu-report-<UTC time>)
#   --pack       after each step, the folder (without its autotune cache) as one gzipped tar at
#                FILE: a machine that gives back a few files gets all of it, even where the run
#                is stopped midway
#   --budget     seconds for the whole run: each step gets what is left, a step that would
#                start with under a minute left is skipped and says so (default: no limit)
#   --allow-software  run on a software adapter too (lavapipe: to check the script, not the card)
#
# benches/gpu/carry.sh packs the binaries and the Vulkan loader for a machine without Rust and
# prints the command that runs this script there.
set -uo pipefail

bin=""
spirv=""
peer=""
out="gpu-report-$(date -u +%Y%m%dT%H%M%SZ)"
pack=""
budget=0
allow_software=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tradetune) bin="${2:?--tradetune needs a path}"; shift 2 ;;
    --spirv) spirv="${2:?--spirv needs a path}"; shift 2 ;;
    --peer) peer="${2:?--peer needs a Python interpreter}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --pack) pack="${2:?--pack needs a file}"; shift 2 ;;
    --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
    --allow-software) allow_software=1; shift ;;
    -h|--help) sed -n '2,53p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$budget" in
  ''|*[!0-9]*) echo "run.sh: --budget '$budget' is not a whole number of seconds" >&2; exit 2 ;;
esac
start=$(date +%s)
# A container's driver libraries and tools may lie outside the loader's and the shell's search
# paths (the borrowed machines mount the driver at /usr/local/nvidia): NVML (each row's busy %
# and memory, the study's verdicts) and nvidia-smi (machine.txt) are looked for there too.
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  if [ -d "$d" ]; then export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"; fi
done
if [ -d /usr/local/nvidia/bin ]; then export PATH="$PATH:/usr/local/nvidia/bin"; fi
if [ -z "$bin" ]; then
  if command -v tradetune >/dev/null 2>&1; then
    bin=$(command -v tradetune)
  elif [ -x target/release/tradetune ]; then
    bin=target/release/tradetune
  else
    echo "run.sh: no tradetune binary: pass --tradetune, put it on PATH, or build target/release/tradetune" >&2
    exit 2
  fi
fi
if ! timeout 60 "$bin" --version >/dev/null 2>&1; then
  echo "run.sh: '$bin' does not run as tradetune" >&2
  exit 2
fi
if [ -n "$spirv" ]; then
  spirv_version=$(timeout 60 "$spirv" --version 2>/dev/null)
  case "$spirv_version" in
    *SPIR-V*) ;;
    *) echo "run.sh: --spirv '$spirv' is not a tradetune built with --features vulkan (its --version: '$spirv_version')" >&2
       exit 2 ;;
  esac
fi
if [ -n "$peer" ] && ! command -v "$peer" >/dev/null 2>&1; then
  echo "run.sh: --peer '$peer' is no program here (benches/peers/README.md says how to make one)" >&2
  exit 2
fi
# The card, before anything is spent on it: wgpu's default adapter is what `bench gpu` and the
# study train on, and a machine whose Vulkan driver did not load offers only a software one.
devices=$(timeout 120 "$bin" devices 2>&1)
adapter=$(printf '%s\n' "$devices" | awk '$1 == "wgpu"')
if ! printf '%s\n' "$adapter" | grep -Eq '^wgpu +wgpu +yes '; then
  echo "run.sh: wgpu finds no adapter here (is the Vulkan loader installed and the driver's ICD found? VK_DRIVER_FILES names it); \`tradetune devices\` says:" >&2
  printf '%s\n' "$devices" >&2
  exit 3
fi
case "$adapter" in
  *"software renderer"*)
    if [ "$allow_software" = 0 ]; then
      echo "run.sh: wgpu's default adapter is a software renderer, not a GPU (the card's Vulkan driver did not load: VK_DRIVER_FILES names its ICD file); --allow-software runs on it anyway:" >&2
      printf '%s\n' "$adapter" >&2
      exit 3
    fi ;;
esac
mkdir -p "$out" || exit 2
: >"$out/steps.txt"
# The peer needs torch and numpy, and a GPU torch sees (the env is numpy on the CPU): without
# them its rows would fail, so it is left out, and said so, rather than the run stopped.
peer_args=()
if [ -n "$peer" ]; then
  check='import numpy, torch; assert torch.cuda.is_available(), "torch " + torch.__version__ + " sees no CUDA or ROCm device"'
  if why=$(timeout 120 "$peer" -c "$check" 2>&1); then
    peer_args=(--peer "$peer")
  else
    echo "== the PyTorch peer is left out: $peer cannot run it ($(printf '%s\n' "$why" | tail -n 1))" | tee -a "$out/steps.txt"
  fi
fi
# A fresh autotune cache of the run's own: the first bench is cold, the later ones find it warm.
export TRADETUNE_GPU_CACHE="$out/gpu-cache"
failed=0

# The folder as one tar at --pack (written beside, then moved: a run stopped midway leaves the
# last whole one), without the autotune cache.
pack() {
  if [ -z "$pack" ]; then return; fi
  if tar -czf "$pack.part" -C "$out" --exclude=./gpu-cache . 2>/dev/null; then
    mv -f "$pack.part" "$pack"
  else
    rm -f "$pack.part"
    echo "   could not pack $out into $pack" | tee -a "$out/steps.txt"
  fi
}

# The seconds a step may take, or nothing when the budget is spent (under a minute left).
left() {
  if [ "$budget" = 0 ]; then echo 86400; return; fi
  local rest=$(( budget - ($(date +%s) - start) ))
  if [ "$rest" -lt 60 ]; then echo ""; else echo "$rest"; fi
}

# step NAME FILE COMMAND...: runs COMMAND into FILE (stderr into FILE's .err) within the budget
# (and within cap=SECONDS before the call, where given), then packs the folder. An argument
# @DEADLINE@ becomes the step's limit less 45 s: `bench gpu --deadline` then starts no run (nor
# agreement check) after it, so that a run begun before it has those seconds to end in and the
# matmul probe and the lines under the table are printed (a run longer than that still loses them).
step() {
  local name="$1" file="$2"; shift 2
  local limit
  limit=$(left)
  if [ -n "$limit" ] && [ -n "${cap:-}" ] && [ "$limit" -gt "$cap" ]; then limit=$cap; fi
  if [ -z "$limit" ]; then
    echo "== $name: skipped, under a minute of the ${budget}s budget left" | tee -a "$out/steps.txt"
    return
  fi
  local deadline=$(( limit - 45 )) args=() a
  if [ "$deadline" -lt 10 ]; then deadline=10; fi
  for a in "$@"; do
    if [ "$a" = @DEADLINE@ ]; then args+=("$deadline"); else args+=("$a"); fi
  done
  echo "== $name ($(date -u +%H:%M:%S) UTC, at most ${limit}s)" | tee -a "$out/steps.txt"
  local t0
  t0=$(date +%s)
  # A study stops gracefully on the first signal (its running trials end as failed, their
  # figures kept); the second, 15 s later, ends whatever is still going.
  timeout -k 15 "$limit" "${args[@]}" >"$out/$file" 2>"$out/${file%.*}.err"
  local status=$?
  local took=$(( $(date +%s) - t0 ))
  if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    echo "   stopped at its limit after ${took}s (what it printed is in $file)" | tee -a "$out/steps.txt"
    failed=1
  elif [ "$status" != 0 ]; then
    echo "   failed (exit $status) after ${took}s: $(tail -n 1 "$out/${file%.*}.err")" | tee -a "$out/steps.txt"
    failed=1
  else
    echo "   done in ${took}s" | tee -a "$out/steps.txt"
  fi
  pack
}

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S') UTC"
  echo "host: $(uname -srm), $(nproc) CPUs"
  echo "tradetune: $(timeout 60 "$bin" --version 2>&1)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 60 nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,clocks.max.sm \
      --format=csv 2>&1
  fi
  if command -v rocm-smi >/dev/null 2>&1; then
    timeout 60 rocm-smi --showproductname --showdriverversion 2>&1
  fi
  echo
  printf '%s\n' "$devices"
  if [ -n "$spirv" ]; then
    echo
    echo "tradetune (SPIR-V): $spirv_version"
    timeout 120 "$spirv" devices 2>&1
  fi
} >"$out/machine.txt"
cat "$out/machine.txt"
pack

# A first small run on the card before any step: it opens the device as training does (every
# feature and limit the adapter offers), has the driver compile kernels and runs an update. Where
# that fails, every step would fail the same way after spending its minutes (the peer's first),
# so the run stops here and says why. Its cache is its own and the drivers' shader caches are
# left alone, so the first step's figures stay cold.
if [ -n "$(left)" ]; then
  smoke_limit=$(left)
  if [ "$smoke_limit" -gt 120 ]; then smoke_limit=120; fi
  echo "== a first run on the card: bench gpu --configs tiny, env on the device, f32 ($(date -u +%H:%M:%S) UTC, at most ${smoke_limit}s)" | tee -a "$out/steps.txt"
  t0=$(date +%s)
  TRADETUNE_GPU_CACHE="$out/smoke-cache" __GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true \
    timeout -k 15 "$smoke_limit" "$bin" bench gpu --configs tiny --placements device --precisions f32 \
    --updates 1 --probe-sizes 256 >"$out/smoke.txt" 2>"$out/smoke.err"
  status=$?
  rm -rf "$out/smoke-cache"
  if [ "$status" != 0 ]; then
    echo "   failed (exit $status) after $(( $(date +%s) - t0 ))s: no step is run; its last words:" | tee -a "$out/steps.txt"
    tail -n 15 "$out/smoke.err" | tee -a "$out/steps.txt"
    pack
    exit 4
  fi
  echo "   done in $(( $(date +%s) - t0 ))s" | tee -a "$out/steps.txt"
  pack
fi

# A card's f32 peak needs products larger than the default probe's 1024² (the H100's 1024² ran at
# 4,740 GFLOP/s of about 60,000): the update's GFLOP/s is held against the best of these.
probe=(--probe-sizes 256,1024,4096)
# The RTX 4080 preset's shape first, cold: host and device env, f32 and f16, and the peer. At
# most four minutes, which `bench gpu` is meant to need for both presets' shapes on any card.
# Two measured updates, so that the GPU's busy % sampled over them (every 0.1 s) has samples
# on a fast card.
cap=240 step "bench gpu, rtx4080, cold" bench-gpu.txt \
  "$bin" bench gpu --configs rtx4080 --updates 2 "${probe[@]}" --deadline @DEADLINE@ "${peer_args[@]}"
# What a user's study sees on the card (issue 32's checks beyond the bench): the first trial of a
# shape in a process, cold but for the autotune answers the bench left (its compile phase, "N s
# compiling"); a second trial of the same shape, which compiles nothing (its phases against the
# first's); each trial's verdict beside the card's busy % sampled every 0.25 s.
# The preset searches the minibatch and the epochs too: this study fixes them at the bench's shape
# and searches the learning rate alone, so both trials run the same kernels.
cat >"$out/study.toml" <<'TOML'
[study]
name = "rtx4080_shape"
description = "benches/gpu/run.sh: the RTX 4080 preset's shape with 256-step rollouts, twice"
direction = "maximize"
objective = "sharpe_excess"
n_trials = 2
workers = 1
devices = ["wgpu"]

[fixed]
env.n_envs = 32
ppo.n_steps = 256
ppo.batch_size = 1024
ppo.n_epochs = 4
ppo.policy.net_arch.pi = [2048, 1024, 512]
ppo.policy.net_arch.vf = [2048, 1024, 512]
ppo.precision = "f16"
train.total_timesteps = 32768
train.eval_every = 2

[search]
"ppo.learning_rate" = { low = 1e-5, high = 1e-3, log = true }

[sampler]
kind = "random"
seed = 42
TOML
# A report folder used again starts the study afresh.
rm -f "$out/study.db" "$out/study.db-wal" "$out/study.db-shm"
cap=150 step "study, the rtx4080 shape, two trials" study.txt \
  "$bin" study run "$out/study.toml" --db "$out/study.db" --telemetry-interval 0.25
cap=60 step "study, its trials' attributes" study-export.txt \
  "$bin" study export rtx4080_shape --db "$out/study.db" --trials "$out/study-trials.csv"
# On the warm cache each run is short, so this one also replays the rollouts' policy step
# (issue 33, TRADETUNE_REPLAY_POLICY): whether a replayed step pays on the card, run by run.
cap=100 step "bench gpu, rtx4080 on the warm cache, policy steps direct and replayed" bench-gpu-cached.txt \
  "$bin" bench gpu --configs rtx4080 --precisions f32 --policy-steps direct,replay "${probe[@]}" \
  --deadline @DEADLINE@
# The SPIR-V build (cooperative-matrix f16, issue 33: shipped only with a real card's figure)
# comes before the other preset's shape, which a short budget loses first. It keeps its
# autotune answers apart (its environment ends in -spirv), so its first run here is cold too.
if [ -n "$spirv" ]; then
  cap=60 step "bench matmul, rtx4080, SPIR-V build" bench-matmul-spirv.txt \
    "$spirv" bench matmul --configs rtx4080
  cap=150 step "bench gpu, rtx4080, SPIR-V build" bench-gpu-spirv.txt \
    "$spirv" bench gpu --configs rtx4080 "${probe[@]}" --deadline @DEADLINE@
fi

# The other preset's shape, cold for its own shapes (the 7900 GRE's owners' card is another, but
# the launches and the phase split are the shape's).
cap=150 step "bench gpu, rx7900gre, cold" bench-gpu-rx7900gre.txt \
  "$bin" bench gpu --configs rx7900gre --updates 2 "${probe[@]}" --deadline @DEADLINE@ "${peer_args[@]}"
cap=60 step "bench matmul, rtx4080" bench-matmul.txt "$bin" bench matmul --configs rtx4080
# The update's minibatches replayed too (TRADETUNE_REPLAY_UPDATE): whether that pays on the card.
cap=90 step "bench gpu, rtx4080, minibatches direct and replayed" bench-gpu-minibatches.txt \
  "$bin" bench gpu --configs rtx4080 --placements device --precisions f32 --policy-steps replay \
  --minibatches direct,replay "${probe[@]}" --deadline @DEADLINE@

echo "== $(( $(date +%s) - start ))s in all; the report is in $out/${pack:+, packed in $pack}" | tee -a "$out/steps.txt"
pack
exit "$failed"
