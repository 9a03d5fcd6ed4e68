import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { loadConfig } from '../lib/config';
import { resourcesOf, synth } from './helpers';

const ROOT = path.join(__dirname, '..');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

function section(title: string): string {
  const start = README.indexOf(`\n## ${title}\n`);
  expect(start).toBeGreaterThan(0);
  const end = README.indexOf('\n## ', start + 1);
  return README.slice(start, end > 0 ? end : undefined);
}

describe('the README\'s deploy path', () => {
  test('the outputs it lists are the stack\'s outputs, each once', () => {
    const { template } = synth(path.join(ROOT, 'config', 'example.yaml'));
    const listed = [...section('Deploying').matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1]);
    expect(listed.sort()).toEqual(Object.keys(template.findOutputs('*')).sort());
  });

  test('the config it copies from config/example.yaml deploys as copied', () => {
    const copy = /^cp (config\/example\.yaml) (\S+)/m.exec(section('Deploying'));
    expect(copy).not.toBeNull();
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-deploy-')), path.basename(copy![2]));
    fs.copyFileSync(path.join(ROOT, copy![1]), file);
    expect(() => loadConfig(file)).not.toThrow();
  });

  test('the state machine names it gives are the deployed ones', () => {
    const { template } = synth(path.join(ROOT, 'config', 'example.yaml'));
    const names = Object.values(resourcesOf(template, 'AWS::StepFunctions::StateMachine'))
      .map((r) => r.Properties.StateMachineName).filter(Boolean).sort();
    expect(names).toEqual(['raidsnap-backup', 'raidsnap-copy', 'raidsnap-drill', 'raidsnap-recovery', 'raidsnap-restore']);
    for (const name of names) expect(README).toContain(`\`${name}\``);
  });

  test('the config error it quotes is the one synth gives', () => {
    const quoted = /`(raidsnap config: config\/arrays\.yaml: [^`]+)`/.exec(section('Deploying'));
    expect(quoted).not.toBeNull();
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-deploy-')), 'arrays.yaml');
    fs.writeFileSync(file, 'arrays:\n  db1:\n    retention: 0\n');
    try {
      loadConfig(file);
      throw new Error('accepted');
    } catch (err) {
      expect((err as { line(f: string): string }).line('config/arrays.yaml')).toBe(quoted![1]);
    }
  });
});

describe('the cost section\'s counts are the stack\'s', () => {
  test('one key, one secret, one dashboard, and the worked example\'s alarms', () => {
    const prices = JSON.parse(fs.readFileSync(path.join(ROOT, 'docs', 'costs', 'prices.json'), 'utf8'));
    // db1 of config/example.yaml alone: recovery, rpoMinutes and a drill.
    const text = fs.readFileSync(path.join(ROOT, 'config', 'example.yaml'), 'utf8');
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-costs-')), 'db1.yaml');
    fs.writeFileSync(file, text.replace(/\n  analytics:\n(    .*\n|\s*\n)*/, '\n'));
    expect(Object.keys(loadConfig(file).arrays)).toEqual(['db1']);
    const { template } = synth(file);
    template.resourceCountIs('AWS::KMS::Key', 1);
    template.resourceCountIs('AWS::SecretsManager::Secret', 1);
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    template.resourceCountIs('AWS::CloudWatch::Alarm', prices.example.alarms);
  });
});
