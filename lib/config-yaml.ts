import { isPair, isScalar, isSeq, LineCounter, Node, parseDocument, visit, YAMLError } from 'yaml';
import { ConfigError } from './config-error';

/** The config file's text as plain data, or a ConfigError that says where the YAML is wrong. A
 * key given twice in one mapping is refused by its dotted path and both lines: `uniqueKeys`
 * (yaml 2.8.1, options.d.ts: "YAML requires map keys to be unique ... Default: true") reports it
 * as DUPLICATE_KEY at the second key, and with one value silently winning a typo'd copy of a
 * setting would be deployed unnoticed. */
export function readYaml(text: string): unknown {
  const lines = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter: lines });
  const [first] = doc.errors;
  if (first) throw yamlProblem(doc, first, lines);
  return doc.toJS();
}

function yamlProblem(doc: ReturnType<typeof parseDocument>, err: YAMLError, lines: LineCounter): ConfigError {
  const at = lines.linePos(err.pos[0]);
  if (err.code === 'DUPLICATE_KEY') {
    const duplicate = duplicateAt(doc, err.pos[0]);
    if (duplicate) {
      const firstLine = lines.linePos(duplicate.firstOffset).line;
      return new ConfigError(duplicate.field, `duplicate key at line ${at.line} (first at line ${firstLine})`, 'keep one of them');
    }
  }
  const message = err.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
  return new ConfigError(`line ${at.line}, column ${at.col}`, message,
    'correct the YAML there (indentation, a missing ":" or an unclosed quote)');
}

/** The dotted path of the key that starts at `offset` (arrays.db1.retention), and where the
 * same key first appeared in its mapping. */
function duplicateAt(doc: ReturnType<typeof parseDocument>, offset: number): { field: string; firstOffset: number } | undefined {
  let found: { field: string; firstOffset: number } | undefined;
  visit(doc, {
    Pair(_key, pair, path) {
      if (!isScalar(pair.key) || pair.key.range?.[0] !== offset) return undefined;
      const parent = path[path.length - 1] as { items: unknown[] };
      const earlier = parent.items.find((p) => isPair(p) && isScalar(p.key) && p.key.value === (pair.key as Node & { value: unknown }).value);
      const firstOffset = (isPair(earlier) && isScalar(earlier.key) && earlier.key.range?.[0]) || offset;
      found = { field: fieldOf([...path, pair]), firstOffset };
      return visit.BREAK;
    },
  });
  return found;
}

function fieldOf(path: readonly unknown[]): string {
  let field = '';
  path.forEach((node, i) => {
    if (isPair(node) && isScalar(node.key)) field += `${field ? '.' : ''}${String(node.key.value)}`;
    if (isSeq(node) && i + 1 < path.length) field += `[${node.items.indexOf(path[i + 1] as never)}]`;
  });
  return field;
}
