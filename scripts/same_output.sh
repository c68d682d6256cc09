#!/usr/bin/env bash
# Do two commits of capplan print and write the same thing? Runs profile (two shared traces),
# plan and whatif at each commit (a detached worktree, this checkout's .venv) into the same
# folder, then diffs every output with timestamps and wall times masked. For changes meant to
# change no behaviour (moves, renames, typed values): every line should read "same".
#   usage: scripts/same_output.sh BASE_REV [HEAD_REV]     (data from ../shared/data)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${CAPPLAN_DATA:-$root/../shared/data}
base=$1; head=${2:-HEAD}
work=$(mktemp -d); out=$work/out

run_at() {  # run_at REV DEST
  local tree=$work/tree
  git -C "$root" worktree add -q --detach "$tree" "$1"
  rm -rf "$out"; mkdir -p "$out"
  local c=(env PYTHONPATH="$tree" "$root/.venv/bin/python" -m capplan)
  (cd "$tree"
   "${c[@]}" profile "$data/AzureLLMInferenceTrace_conv.csv" -o "$out/azure.json" >"$out/profile.out" 2>&1
   "${c[@]}" profile "$data/mooncake_synthetic_trace.jsonl" -o "$out/mooncake.json" >"$out/profile2.out" 2>&1
   "${c[@]}" plan --profile "$out/azure.json" --limit 10rps --slo 'ttft:p95<=2s' --fleet-span 20 \
     -o "$out/plan.json" >"$out/plan.out" 2>&1
   "${c[@]}" whatif --profile "$out/azure.json" --slo 'ttft:p95<=2s' --gpu H100-80GB,A100-80GB \
     --level-duration 10 -o "$out/whatif.json" >"$out/whatif.out" 2>&1) || true
  git -C "$root" worktree remove --force "$tree"
  mv "$out" "$2"
}

mask() {  # timestamps, wall times; a final newline either way
  sed -E 's/20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.+]+/<time>/g; s/"wall_s": [0-9.e-]+/"wall_s": <s>/;
          s/[0-9.]+ s wall/<s> wall/g; s/in [0-9.]+ s/in <s>/g; s/levels, [0-9.]+ s\)/levels, <s>)/g' "$1"
  echo
}

run_at "$base" "$work/base"
run_at "$head" "$work/head"
status=0
for f in "$work/base"/*; do
  name=$(basename "$f")
  if diff -B <(mask "$f") <(mask "$work/head/$name") >"$work/$name.diff"; then
    echo "same      $name"
  else
    echo "DIFFERENT $name ($(grep -c '^[<>]' "$work/$name.diff") lines): $work/$name.diff"
    status=1
  fi
done
exit $status
