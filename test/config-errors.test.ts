import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ConfigError, loadConfig, parseConfig } from '../lib/config';

const ROOT = path.join(__dirname, '..');

function configFile(text: string): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-config-')), 'arrays.yaml');
  fs.writeFileSync(file, text);
  return file;
}

function refusal(text: string): ConfigError {
  const file = configFile(text);
  try {
    loadConfig(file);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('the config was accepted');
}

describe('a config mistake is one line: file, key, problem and fix', () => {
  test.each([
    ['arrays:\n  db1:\n    retention: 0\n', 'arrays.db1.retention', '0 is out of range; use an integer from 1 to 1000'],
    ['arrays:\n  db1:\n    retension: 3\n', 'arrays.db1.retension', 'unknown setting; allowed here: schedule, schedules,'],
    ['arrays:\n  db1:\n    consistency: app\n', 'arrays.db1.consistency', '"app" is not a known value; use one of: crash, fsfreeze'],
    ['arrays:\n  db1:\n    recovery: {instanceId: db1-host}\n', 'arrays.db1.recovery.instanceId', '"db1-host" is not valid; use the array instance\'s id (i- and hex digits, such as i-0123456789abcdef0)'],
    ['arrays:\n  db1:\n    fastRestore: {zones: [us-east-1a, us-east-1a], sets: 1, members: 3}\n', 'arrays.db1.fastRestore.zones', 'names a zone twice; list each zone once'],
  ])('%j', (text, field, words) => {
    const err = refusal(text);
    expect(err.field).toBe(field);
    const line = err.line();
    expect(line).toMatch(new RegExp(`^raidsnap config: ${escape(err.file!)}: ${escape(field)}: [^;\\n]+; [^\\n]+$`));
    expect(line).toContain(words);
    expect(line.split('\n')).toHaveLength(1);
  });

  test('every refusal of the parser carries a fix after its problem', () => {
    for (const raw of [{ arrays: [] }, { defaults: 3 }, { arrays: { db1: { schedules: 'rate(1 day)' } } }, { notifications: { emails: 'a@b.c' } },
      { arrays: { db1: { schedule: 'rate(1 day)', schedules: [] } } }, { arrays: { db1: { drill: { targetInstanceId: 'i-0123456789abcdef0' } } } }]) {
      try {
        parseConfig(raw);
        throw new Error(`accepted ${JSON.stringify(raw)}`);
      } catch (err) {
        expect((err as ConfigError).line()).toMatch(/^raidsnap config: [^:]+: [^;]+; .+$/);
      }
    }
  });

  test('a duplicate key names the file, the key and both lines', () => {
    const err = refusal('arrays:\n  db1:\n    retention: 3\n    consistency: crash\n    retention: 4\n');
    expect(err.field).toBe('arrays.db1.retention');
    expect(err.line()).toBe(`raidsnap config: ${err.file}: arrays.db1.retention: duplicate key at line 5 (first at line 3); keep one of them`);
  });

  test('a duplicate array names the array', () => {
    const err = refusal('arrays:\n  db1: {retention: 3}\n  db1: {retention: 4}\n');
    expect(err.line()).toContain(': arrays.db1: duplicate key at line 3 (first at line 2); keep one of them');
  });

  test('broken YAML names the file and the line', () => {
    const err = refusal('arrays:\n  db1:\n    retention: "3\n');
    expect(err.line()).toMatch(/^raidsnap config: \S+arrays\.yaml: line \d+, column \d+: [^;\n]+; [^\n]+$/);
  });

  test('a missing file names the path', () => {
    const missing = path.join(os.tmpdir(), 'raidsnap-no-such-config.yaml');
    expect(() => loadConfig(missing)).toThrow(ConfigError);
    try {
      loadConfig(missing);
    } catch (err) {
      expect((err as ConfigError).line()).toMatch(/^raidsnap config: \S+raidsnap-no-such-config\.yaml: \(file\): cannot read it \(ENOENT[^;]*\); /);
    }
  });
});

describe('cdk synth with a config mistake', () => {
  // Synthesized into a directory of the test's own: cdk.out may be in use.
  const synth = (file: string) => spawnSync(path.join(ROOT, 'node_modules', '.bin', 'cdk'),
    ['synth', '--quiet', '-c', `config=${file}`, '--output', fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-out-'))],
    { cwd: ROOT, encoding: 'utf8' });

  test.each([
    ['a value the parser refuses', 'arrays:\n  db1:\n    retention: 0\n', 'arrays.db1.retention: 0 is out of range'],
    ['a duplicate key', 'arrays:\n  db1:\n    retention: 3\n    retention: 4\n', 'arrays.db1.retention: duplicate key at line 4 (first at line 3)'],
    ['a policy the stack refuses', 'arrays:\n  db1:\n    fastRestore: {zones: [us-east-1a], sets: 3, members: 8}\n', 'arrays.db1.fastRestore: '],
  ])('%s: one line and a non-zero exit, no stack trace', (_what, text, words) => {
    const file = configFile(text);
    const run = synth(file);
    expect(run.status).not.toBe(0);
    const lines = run.stderr.trim().split('\n');
    const ours = lines.filter((l) => l.startsWith('raidsnap config: '));
    expect(ours).toEqual([expect.stringContaining(`raidsnap config: ${file}: ${words}`)]);
    // The rest is the CDK CLI's own last word on the app's exit.
    expect(lines.filter((l) => !ours.includes(l))).toEqual([expect.stringMatching(/Subprocess exited with error 1$/)]);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
