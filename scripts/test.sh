#!/usr/bin/env bash
# Every check raidsnap has, in one command; installs what it needs first (scripts/setup.sh and,
# for the VM suite, scripts/vm/ensure.sh). Safe to run twice. Ends with one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
results=.cache/test-results
rm -rf "$results" && mkdir -p "$results"

step "setup"
scripts/setup.sh

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

step "cdk synth (no config, and the example config), cfn-lint"
rm -rf cdk.out cdk.out.example
node_modules/.bin/cdk synth --quiet -o cdk.out >/dev/null
node_modules/.bin/cdk synth --quiet -o cdk.out.example -c config=config/example.yaml >/dev/null
.venv/bin/cfn-lint --config-file .cfnlintrc.yaml -- cdk.out/raidsnap.template.json cdk.out.example/raidsnap.template.json

step "checkov"
.venv-checkov/bin/checkov --config-file .checkov.yaml -f cdk.out/raidsnap.template.json -f cdk.out.example/raidsnap.template.json

step "jest"
node_modules/.bin/jest --ci --json --outputFile="$results/jest.json"

step "pytest: unit, emulation and workflows"
.venv/bin/python -m pytest test/python -q -p no:cacheprovider --junitxml="$results/python.xml"

step "VM suite: scripts on a real md driver under QEMU"
scripts/vm/ensure.sh
.venv/bin/python -m pytest test/vm -m vm -q -p no:cacheprovider --junitxml="$results/vm.xml"

step "summary"
.venv/bin/python scripts/summarize.py "$results"
