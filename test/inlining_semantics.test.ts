import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { checkSingleDefinitions, inlineLibraries, ScriptIncludeError } from '../lib/constructs/documents';
import { sourceLine, writeLines } from './helpers';

/** What the inliner promises against what bash does with the same files: the deployed document
 * (one file, libraries inlined) and the script run from the repository (libraries sourced) are
 * the same program, and no `source` is left for the agent's `_script.sh` to trip over. */
describe('inlined scripts behave as the sourced scripts', () => {
  let dir: string;
  let lib: string;
  const write = writeLines;
  const include = sourceLine;
  const bash = (file: string): string => execFileSync('bash', [file], { encoding: 'utf8', cwd: '/' });

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-inline-sem-'));
    lib = path.join(dir, 'lib');
    fs.mkdirSync(lib);
    // As ssm/scripts/lib: base.sh defines say(); input.sh and system_directory.sh each source
    // the one below them.
    write(path.join(lib, 'base.sh'), ['# shellcheck shell=bash', "say() { printf 'library say\\n'; }"]);
    write(path.join(lib, 'input.sh'), ['# shellcheck shell=bash', ...include('base.sh'), 'require() { :; }']);
    write(path.join(lib, 'system_directory.sh'), ['# shellcheck shell=bash', ...include('input.sh'), 'system() { :; }']);
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const deploy = (script: string): string[] => {
    const included = new Set<string>();
    const lines = inlineLibraries(script, lib, included);
    checkSingleDefinitions(script, lines, included);
    return lines;
  };

  test('a script that sources a library twice (directly and through another) runs the same deployed as by hand', () => {
    const script = write(path.join(dir, 's.sh'), [
      '#!/usr/bin/env bash',
      'set -euo pipefail',
      ...include('lib/input.sh'),
      ...include('lib/system_directory.sh'),
      'say',
    ]);
    const deployed = write(path.join(dir, 'deployed.sh'), deploy(script));
    expect(bash(deployed)).toBe(bash(script));
    expect(bash(deployed)).toBe('library say\n');
  });

  test('a script that redefines a library function is refused at synth: by hand a later source brings the library\'s back, deployed the script\'s would stay', () => {
    const script = write(path.join(dir, 's.sh'), [
      '#!/usr/bin/env bash',
      'set -euo pipefail',
      ...include('lib/input.sh'),
      "say() { printf 'script say\\n'; }",
      ...include('lib/system_directory.sh'),
      'say',
    ]);
    expect(bash(script)).toBe('library say\n');
    expect(() => deploy(script)).toThrow(/function say of base\.sh is defined 2 times/);
  });

  test('a script that sets a library\'s top-level variable is refused at synth', () => {
    write(path.join(lib, 'dirs.sh'), ['# shellcheck shell=bash', 'state_dir=/run/raidsnap', 'where() { echo "$state_dir"; }']);
    const script = write(path.join(dir, 's.sh'), ['#!/usr/bin/env bash', ...include('lib/dirs.sh'), 'state_dir=/tmp/x', 'where']);
    expect(() => deploy(script)).toThrow(/variable state_dir of dirs\.sh is set elsewhere/);
  });

  test.each([
    ['a source in a list', '[[ -r /etc/raidsnap.conf ]] && source /etc/raidsnap.conf'],
    ['a source in an if', 'if [[ -r /etc/raidsnap.conf ]]; then . /etc/raidsnap.conf; fi'],
    ['builtin source', 'builtin source /etc/raidsnap.conf'],
  ])('%s is refused at synth ("Any other source line fails the synth", docs/architecture.md)', (_what, line) => {
    const script = write(path.join(dir, 's.sh'), ['#!/usr/bin/env bash', ...include('lib/input.sh'), line]);
    expect(() => inlineLibraries(script, lib)).toThrow(ScriptIncludeError);
  });
});
