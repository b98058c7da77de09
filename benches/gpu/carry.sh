#!/usr/bin/env bash
# benches/gpu/carry.sh: makes, on the machine you build on, the folder that a borrowed GPU
# machine needs to run benches/gpu/run.sh (a machine with the card's driver but maybe no Rust,
# no Vulkan loader and a small upload), and prints the one command to run there. The folder:
#
#   .gpu-carry/tradetune.xz        the release build, stripped and xz-compressed
#   .gpu-carry/tradetune-spirv.xz  with --spirv: the same built with `--features vulkan`
#   .gpu-carry/*.deb               the Vulkan loader (libvulkan1) and the GL dispatch libraries the
#                                  NVIDIA driver's Vulkan library loads through (libglvnd0 and its
#                                  kin), for x86-64: the set seen working on the borrowed machines
#                                  (the device tool's README), unpacked there before each run
#
# The folder is ignored through .git/info/exclude, so it never lands in a commit. Building
# shares the target directory (CARGO_TARGET_DIR, else target/): each feature set rebuilds burn
# once, about 20 minutes cold on 2 cores, a minute or two warm.
#
# Usage: benches/gpu/carry.sh [--spirv] [--budget SECONDS]
#   --spirv   also build and pack the SPIR-V binary (run.sh --spirv runs it beside the default)
#   --budget  the seconds the printed command gives run.sh (default 500; at most 540, a minute
#             under the 600 s a call may run)
set -euo pipefail

spirv=0
budget=500
while [ $# -gt 0 ]; do
  case "$1" in
    --spirv) spirv=1; shift ;;
    --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "carry.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$budget" in
  ''|*[!0-9]*) echo "carry.sh: --budget '$budget' is not a whole number of seconds" >&2; exit 2 ;;
esac
if [ "$budget" -gt 540 ]; then
  echo "carry.sh: --budget $budget leaves no minute under the 600 s a call may run; at most 540" >&2
  exit 2
fi
if [ "$(uname -m)" != x86_64 ]; then
  echo "carry.sh: this machine is $(uname -m); the GPU machine runs x86-64 builds only" >&2
  exit 2
fi

root=$(git rev-parse --show-toplevel)
cd "$root"
dir=.gpu-carry
target=${CARGO_TARGET_DIR:-$root/target}
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")" "$dir"
grep -qxF "/$dir/" "$exclude" 2>/dev/null || echo "/$dir/" >>"$exclude"

# pack NAME: strips the fresh release binary into the folder as NAME.xz.
pack() {
  strip -o "$dir/$1" "$target/release/tradetune"
  xz -T0 -6 -f "$dir/$1"
  echo "  $dir/$1.xz: $(du -h "$dir/$1.xz" | cut -f1)"
}

# The clippy wrapper of a development shell would turn the release build into a lint run.
build() {
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS cargo build --release -p tradetune "$@"
}

rm -f "$dir"/tradetune*
echo "building the release binary (target directory $target)"
build
pack tradetune
if [ "$spirv" = 1 ]; then
  echo "building the SPIR-V binary (--features vulkan)"
  build --features vulkan
  pack tradetune-spirv
fi

# Without them the card's driver may not load and wgpu offers no adapter: the borrowed minutes
# would be spent finding that out, so a failed download stops here.
loader=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
echo "downloading the Vulkan loader and the GL dispatch libraries (x86-64): ${loader[*]}"
lists=$(mktemp -d)
apt=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
mkdir -p "$lists/partial"
rm -f "$dir"/*.deb
if ! apt-get "${apt[@]}" update >"$lists/update.log" 2>&1; then
  echo "carry.sh: apt-get update failed ($(tail -n 1 "$lists/update.log")): no loader packed, and the GPU machine may have none" >&2
  rm -rf "$lists"
  exit 1
fi
if ! (cd "$dir" && apt-get "${apt[@]}" download "${loader[@]}" >"$lists/download.log" 2>&1); then
  echo "carry.sh: apt-get download ${loader[*]} failed ($(tail -n 1 "$lists/download.log"))" >&2
  rm -rf "$lists"
  exit 1
fi
rm -rf "$lists"

# What one call carries: the checkout's files (tracked, and untracked ones not ignored) and the
# folder, 64 MiB together.
tracked=$(git ls-files -z --cached --others --exclude-standard \
  | xargs -0 -r stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}' || true)
packed=$(du -cb "$dir" | tail -n 1 | cut -f1)
total=$(( tracked + packed ))
echo "the checkout ($(( tracked / 1048576 )) MiB) and $dir ($(( packed / 1048576 )) MiB): $(( total / 1048576 )) MiB of the 64 a call carries"
if [ "$total" -gt $(( 64 * 1048576 )) ]; then
  echo "carry.sh: over the 64 MiB a call carries; leave --spirv out" >&2
  exit 1
fi

spirv_arg=""
if [ "$spirv" = 1 ]; then spirv_arg=" --spirv $dir/tradetune-spirv"; fi
# The report is written outside $OUT and packed into it after each step (the device tool gives
# back 8 files of $OUT), and its bench table is printed last, for the reply's own tail.
cat <<EOF

On the GPU machine, with carry ["$dir"] and timeout_s $(( budget + 60 )):

for f in $dir/*.deb; do dpkg -x "\$f" /; done; ldconfig; n=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f \$n ] && export VK_DRIVER_FILES=\$n VK_ICD_FILENAMES=\$n; e=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; [ -f \$e ] && export __EGL_VENDOR_LIBRARY_FILENAMES=\$e; r=\$(mktemp -d)/gpu-report; xz -df $dir/*.xz && chmod +x $dir/tradetune* && bash benches/gpu/run.sh --tradetune $dir/tradetune$spirv_arg --peer python3 --out \$r --pack \$OUT/gpu-report.tgz --budget $budget; tail -c 5000 \$r/bench-gpu.txt
EOF
