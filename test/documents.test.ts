import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { DOCUMENT_NAMES, inlineLibraries, LIBRARY_DIR, ScriptIncludeError } from '../lib/constructs/documents';
import { resourcesOf, sourceLine, synth, writeLines } from './helpers';

const SCRIPTS = path.join(__dirname, '..', 'ssm', 'scripts');
const LIBRARIES = fs.readdirSync(LIBRARY_DIR).filter((f) => f.endsWith('.sh')).sort();
const SOURCE = /^source "\$\(dirname "\$\{BASH_SOURCE\[0\]\}"\)\/(?:lib\/)?([a-z0-9_]+\.sh)"$/;
const ANY_SOURCE = /^\s*(source|\.)\s/;

/** "Content as SSM stores it can be at most 64 KB, including the content specified for input
 * parameters at runtime" (Creating SSM document content,
 * https://docs.aws.amazon.com/systems-manager/latest/userguide/documents-creating-content.html;
 * CreateDocument's MaxDocumentSizeExceeded: "The size limit of a document is 64 KB"). */
const DOCUMENT_SIZE_LIMIT = 64 * 1024;

const linesOf = (file: string): string[] => fs.readFileSync(file, 'utf8').replace(/\n$/, '').split('\n');

/** The libraries a file sources directly, by file name. */
const sourcedBy = (file: string): string[] => linesOf(file).flatMap((l) => SOURCE.exec(l)?.[1] ?? []);

/** A file's own lines: without the include pairs (directive and source line) and a library's
 * shellcheck header, leading blank lines dropped. */
function ownLines(file: string): string[] {
  const lines = linesOf(file).filter((l) => !l.startsWith('# shellcheck source=') && !SOURCE.test(l) && l !== '# shellcheck shell=bash');
  while (lines[0] === '') lines.shift();
  return lines;
}

/** Where `block` stands in `lines` as consecutive lines. */
function positions(lines: string[], block: string[]): number[] {
  const out: number[] = [];
  for (let i = 0; i + block.length <= lines.length; i++) {
    if (block.every((b, k) => lines[i + k] === b)) out.push(i);
  }
  return out;
}

/** Whether `part` stands in `whole` in order (not necessarily consecutively). */
function inOrder(whole: string[], part: string[]): boolean {
  let k = 0;
  for (const line of whole) if (k < part.length && line === part[k]) k++;
  return k === part.length;
}

describe('SSM documents in the template', () => {
  const { template } = synth();
  const docs = Object.values(resourcesOf(template, 'AWS::SSM::Document'));

  test('one Command document per on-instance operation, named after the stack', () => {
    expect(docs.map((d) => d.Properties.Name).sort()).toEqual(DOCUMENT_NAMES.map((n) => `raidsnap-${n}`).sort());
    for (const d of docs) expect(d.Properties).toMatchObject({ DocumentType: 'Command', UpdateMethod: 'NewVersion' });
  });

  const runCommandOf = (name: string): string[] => {
    const doc = docs.find((d) => d.Properties.Name === `raidsnap-${name}`)!;
    return (doc.Properties.Content.mainSteps as Array<{ inputs: { runCommand: string[] } }>).flatMap((s) => s.inputs.runCommand);
  };

  test.each([...DOCUMENT_NAMES])('%s carries one self-contained script: its own lines in order, nothing left to source', (name) => {
    const doc = docs.find((d) => d.Properties.Name === `raidsnap-${name}`)!;
    expect(doc.Properties.Content.schemaVersion).toBe('2.2');
    const lines = runCommandOf(name);
    expect(lines.some((l) => l.startsWith('@include'))).toBe(false);
    expect(lines.filter((l) => ANY_SOURCE.test(l) || l.startsWith('# shellcheck source='))).toEqual([]);
    const script = path.join(SCRIPTS, `${name}.sh`);
    expect(lines[0]).toBe('#!/usr/bin/env bash');
    expect(inOrder(lines, ownLines(script))).toBe(true);
  });

  test.each([...DOCUMENT_NAMES])('%s inlines each library it needs once, in one piece, and no other', (name) => {
    const lines = runCommandOf(name);
    // What the script sources, and what those source in turn.
    const needed = new Set<string>();
    const visit = (file: string): void => {
      for (const lib of sourcedBy(file)) {
        if (!needed.has(lib)) {
          needed.add(lib);
          visit(path.join(LIBRARY_DIR, lib));
        }
      }
    };
    visit(path.join(SCRIPTS, `${name}.sh`));
    expect(needed.size).toBeGreaterThan(0);
    for (const lib of LIBRARIES) {
      expect([lib, positions(lines, ownLines(path.join(LIBRARY_DIR, lib))).length]).toEqual([lib, needed.has(lib) ? 1 : 0]);
    }
    // No function is defined twice (a library's inlined twice, or a script's own copy of one).
    const defined = lines.flatMap((l) => /^([A-Za-z_][A-Za-z0-9_]*)\(\) \{/.exec(l)?.[1] ?? []);
    expect(defined.filter((f, i) => defined.indexOf(f) !== i)).toEqual([]);
  });

  test.each([...DOCUMENT_NAMES])('%s fits SSM\'s document size limit with every parameter at its longest', (name) => {
    const content = docs.find((d) => d.Properties.Name === `raidsnap-${name}`)!.Properties.Content;
    const params = Object.values(content.parameters as Record<string, { maxChars?: number }>);
    // Every parameter is bounded, so the runtime parameters' share of the limit is bounded too.
    for (const p of params) expect(p.maxChars).toBeGreaterThan(0);
    const runtime = params.reduce((sum, p) => sum + p.maxChars!, 0);
    // Indented JSON: larger than however else the same content is serialized.
    const stored = Buffer.byteLength(JSON.stringify(content, null, 2), 'utf8');
    expect(stored + runtime).toBeLessThanOrEqual(DOCUMENT_SIZE_LIMIT);
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

describe('script libraries', () => {
  const scripts = fs.readdirSync(SCRIPTS).filter((f) => f.endsWith('.sh'));

  test.each([...scripts, ...LIBRARIES.map((f) => `lib/${f}`)])(
    'every library ssm/scripts/%s sources resolves to a file in ssm/scripts/lib, named by its shellcheck directive',
    (file) => {
      const lines = inlineLibraries(path.join(SCRIPTS, file));
      expect(lines.filter((l) => ANY_SOURCE.test(l))).toEqual([]);
    },
  );

  test('every library serves some document', () => {
    const used = new Set(DOCUMENT_NAMES.flatMap((n) => sourcedBy(path.join(SCRIPTS, `${n}.sh`))));
    for (const lib of LIBRARIES) for (const l of sourcedBy(path.join(LIBRARY_DIR, lib))) used.add(l);
    expect(LIBRARIES.filter((l) => !used.has(l))).toEqual([]);
  });

  describe('inlining', () => {
    let dir: string;
    let lib: string;
    const write = writeLines;
    const include = sourceLine;
    beforeEach(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raidsnap-inline-'));
      lib = path.join(dir, 'lib');
      fs.mkdirSync(lib);
      write(path.join(lib, 'a.sh'), ['# shellcheck shell=bash', 'a() { :; }']);
      write(path.join(lib, 'b.sh'), ['# shellcheck shell=bash', ...include('a.sh'), '', 'b() { a; }']);
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    test('a library sourced twice (directly and through another) is inlined once, where it is first sourced', () => {
      const script = write(path.join(dir, 's.sh'), ['#!/usr/bin/env bash', '', ...include('lib/b.sh'), ...include('lib/a.sh'), '', 'b']);
      expect(inlineLibraries(script, lib)).toEqual(['#!/usr/bin/env bash', '', 'a() { :; }', '', 'b() { a; }', '', 'b']);
    });

    test.each([
      ['a library that does not exist', [...include('lib/c.sh')], /lib\/c\.sh does not exist/],
      ['a source line without its directive', ['source "$(dirname "${BASH_SOURCE[0]}")/lib/a.sh"'], /shellcheck source=lib\/a\.sh/],
      ['a directive naming another file', ['# shellcheck source=lib/b.sh', 'source "$(dirname "${BASH_SOURCE[0]}")/lib/a.sh"'], /shellcheck source=lib\/a\.sh/],
      ['a file outside the library folder', [...include('other.sh')], /other\.sh is not a library/],
      ['any other form of source', ['. /etc/profile'], /only 'source/],
    ])('%s is refused at synth', (_what, lines, message) => {
      fs.writeFileSync(path.join(dir, 'other.sh'), '# shellcheck shell=bash\n');
      const script = write(path.join(dir, 's.sh'), ['#!/usr/bin/env bash', ...lines]);
      expect(() => inlineLibraries(script, lib)).toThrow(ScriptIncludeError);
      expect(() => inlineLibraries(script, lib)).toThrow(message);
    });
  });
});
