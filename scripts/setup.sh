#!/usr/bin/env bash
# Installs everything raidsnap's demo and tests need on a fresh Debian machine; safe to run twice,
# and needs no network once done. Node packages from package-lock.json; a Python virtual
# environment in .venv with the pinned tools and the `raidsnap` command (pyproject.toml, installed
# editable with its emulation extra); the Lambda dependency layer in .cache/lambda-layer (boto3
# pinned in lambdas/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

if [ ! -x node_modules/.bin/cdk ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

stamp=.venv/.requirements.sha256
want=$(cat requirements-dev.txt lambdas/requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || [ ! -x .venv/bin/raidsnap ]; then
  if ! command -v uv >/dev/null 2>&1 && [ ! -x .venv/bin/uv ]; then
    log "creating .venv with pip"
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check uv==0.13.8
  fi
  uv_bin=$(command -v uv || echo .venv/bin/uv)
  [ -x .venv/bin/python ] || "$uv_bin" venv --quiet .venv
  log "installing Python packages into .venv"
  # One resolution: the pins of requirements-dev.txt satisfy the command's own ranges.
  "$uv_bin" pip install --quiet --python .venv/bin/python -r requirements-dev.txt -e ".[emulation]"
  echo "$want" > "$stamp"
fi

layer=.cache/lambda-layer
layer_stamp=$layer/.requirements.sha256
layer_want=$(sha256sum lambdas/requirements.txt | cut -d' ' -f1)
if [ ! -f "$layer_stamp" ] || [ "$(cat "$layer_stamp")" != "$layer_want" ]; then
  log "building the Lambda dependency layer"
  rm -rf "$layer"
  mkdir -p "$layer/python"
  uv_bin=$(command -v uv || echo .venv/bin/uv)
  # Powertools (and pydantic with it) comes from the public Powertools layer; boto3 is ours, so
  # that the API surface the functions use does not depend on what the runtime bundles.
  mapfile -t boto_pins < <(grep -E "^boto3==" lambdas/requirements.txt)
  "$uv_bin" pip install --quiet --target "$layer/python" --python-version 3.13 \
    --python-platform aarch64-manylinux2014 "${boto_pins[@]}"
  echo "$layer_want" > "$layer_stamp"
fi
# checkov pins its own dependencies (boto3 among them): it lives in a venv of its own.
if [ ! -x .venv-checkov/bin/checkov ]; then
  log "installing checkov into .venv-checkov"
  uv_bin=$(command -v uv || echo .venv/bin/uv)
  "$uv_bin" venv --quiet .venv-checkov
  "$uv_bin" pip install --quiet --python .venv-checkov/bin/python checkov==3.3.30
fi
log "ready"
