import * as fs from 'fs';
import * as path from 'path';
import { DOCUMENT_NAMES } from '../lib/constructs/documents';
import { resourcesOf, synth } from './helpers';

const SCRIPTS = path.join(__dirname, '..', 'ssm', 'scripts');

describe('SSM documents in the template', () => {
  const { template } = synth();
  const docs = Object.values(resourcesOf(template, 'AWS::SSM::Document'));

  test('one Command document per on-instance operation, named after the stack', () => {
    expect(docs.map((d) => d.Properties.Name).sort()).toEqual(DOCUMENT_NAMES.map((n) => `raidsnap-${n}`).sort());
    for (const d of docs) expect(d.Properties).toMatchObject({ DocumentType: 'Command', UpdateMethod: 'NewVersion' });
  });

  test.each([...DOCUMENT_NAMES])('%s carries its script inline, line for line', (name) => {
    const doc = docs.find((d) => d.Properties.Name === `raidsnap-${name}`)!;
    const content = doc.Properties.Content;
    expect(content.schemaVersion).toBe('2.2');
    const steps = content.mainSteps as Array<{ action: string; inputs: { runCommand: string[] } }>;
    const lines = steps.flatMap((s) => s.inputs.runCommand);
    expect(lines.some((l) => l.startsWith('@include'))).toBe(false);
    const script = fs.readFileSync(path.join(SCRIPTS, `${name}.sh`), 'utf8').replace(/\n$/, '').split('\n');
    expect(lines).toEqual(script);
  });

  test.each([...DOCUMENT_NAMES])('%s: every parameter has a pattern and reaches the script only as SSM_<Name>', (name) => {
    const doc = docs.find((d) => d.Properties.Name === `raidsnap-${name}`)!;
    const content = doc.Properties.Content;
    const params = content.parameters as Record<string, { allowedPattern?: string }>;
    expect(Object.keys(params).length).toBeGreaterThan(0);
    const text = (content.mainSteps as Array<{ inputs: { runCommand: string[] } }>).flatMap((s) => s.inputs.runCommand).join('\n');
    for (const [param, spec] of Object.entries(params)) {
      expect(spec.allowedPattern).toMatch(/^\^.*\$$/);
      expect(text).toContain(`SSM_${param}`);
    }
    expect(text).not.toMatch(/\{\{/);
  });

  test.each([...DOCUMENT_NAMES])('%s: interpolationType ENV_VAR sits on each parameter, where the SSM agent reads it', (name) => {
    const doc = docs.find((d) => d.Properties.Name === `raidsnap-${name}`)!;
    const content = doc.Properties.Content;
    for (const spec of Object.values(content.parameters as Record<string, { interpolationType?: string }>)) {
      expect(spec.interpolationType).toBe('ENV_VAR');
    }
    // Not an input of aws:runShellScript: there it is ignored and no SSM_ variable is exported.
    for (const step of content.mainSteps as Array<{ inputs: Record<string, unknown> }>) {
      expect(step.inputs).not.toHaveProperty('interpolationType');
    }
  });
});
