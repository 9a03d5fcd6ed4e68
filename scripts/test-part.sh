#!/usr/bin/env bash
# One part of `make test` (scripts/test.sh runs the three at once, each into a log of its own):
#   checks   types, lint, shellcheck, cfn-lint, checkov, jest
#   pytest   unit, emulation and workflow tests, in two processes (pytest-xdist, a file each)
#   vm       the scripts on a real md driver under QEMU
# Needs what scripts/setup.sh installs and both synthesized templates (cdk.out, cdk.out.example).
# Ends with the part's wall and CPU seconds, whether it passed or not.
set -euo pipefail
cd "$(dirname "$0")/.."

part=${1:?usage: test-part.sh checks|pytest|vm RESULTS_DIR}
results=${2:?usage: test-part.sh checks|pytest|vm RESULTS_DIR}

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# bash's `times`: this shell's and its children's user and system CPU, as "XmY.YYYs" pairs.
cpu_seconds() {
  times | awk '{ for (i = 1; i <= NF; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } }
               END { printf "%.0f", s }'
}
report() {
  local rc=$?
  printf '\n[%s] %s after %d s wall, %s s CPU (user+sys, with its children)\n' "$part" \
    "$([ "$rc" -eq 0 ] && echo passed || echo "FAILED (exit $rc)")" "$SECONDS" "$(cpu_seconds)"
}
trap report EXIT

case $part in
  checks)
    step "TypeScript: tsc --noEmit"
    node_modules/.bin/tsc --noEmit

    step "Python: ruff, mypy --strict"
    .venv/bin/ruff check --config lambdas/pyproject.toml lambdas emulation cli scripts test/python test/vm
    .venv/bin/ruff format --check --config lambdas/pyproject.toml lambdas emulation cli scripts test/python test/vm
    .venv/bin/mypy --config-file lambdas/pyproject.toml lambdas/raidsnap emulation/raidsnap_emulation cli/raidsnap_cli

    step "shellcheck"
    # Every tracked shell script, with or without a .sh suffix (the VM's init has none).
    mapfile -t scripts < <(git ls-files | while read -r f; do
      case "$f" in
        *.sh) echo "$f" ;;
        *) first=$(head -c 64 "$f" 2>/dev/null | tr -d '\0' || true)
           if [[ $first =~ ^\#\!/(usr/)?bin/(env\ )?(ba)?sh ]]; then echo "$f"; fi ;;
      esac
    done)
    .venv/bin/shellcheck -x "${scripts[@]}"

    step "cfn-lint"
    .venv/bin/cfn-lint --config-file .cfnlintrc.yaml -- cdk.out/raidsnap.template.json cdk.out.example/raidsnap.template.json

    step "checkov"
    .venv-checkov/bin/checkov --config-file .checkov.yaml -f cdk.out/raidsnap.template.json -f cdk.out.example/raidsnap.template.json

    step "jest"
    node_modules/.bin/jest --ci --json --outputFile="$results/jest.json"
    ;;
  pytest)
    step "pytest: unit, emulation and workflows"
    # A test file stays in one process: several build module-scoped fixtures that take minutes.
    .venv/bin/python -m pytest test/python -q -p no:cacheprovider -n 2 --dist loadfile \
      --junitxml="$results/python.xml"
    ;;
  vm)
    step "VM suite: scripts on a real md driver under QEMU"
    scripts/vm/ensure.sh
    .venv/bin/python -m pytest test/vm -m vm -q -p no:cacheprovider --junitxml="$results/vm.xml"
    ;;
  *)
    echo "test-part.sh: no part named $part" >&2
    exit 2
    ;;
esac
