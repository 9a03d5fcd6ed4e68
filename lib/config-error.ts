/** A mistake in the config: where (the file, once known, and the key), what is wrong, and what
 * to write instead. The CDK app prints `line()` alone and exits non-zero (bin/raidsnap.ts). */
export class ConfigError extends Error {
  file?: string;

  constructor(readonly field: string, readonly problem: string, readonly fix: string) {
    super(`raidsnap config: ${field}: ${problem}; ${fix}`);
    this.name = 'ConfigError';
  }

  /** One line: "raidsnap config: <file>: <key>: <problem>; <fix>". */
  line(file: string | undefined = this.file): string {
    return `raidsnap config: ${file ? `${file}: ` : ''}${this.field}: ${this.problem}; ${this.fix}`;
  }
}

/** How a module that parses one part of the config reports a mistake: lib/config.ts passes one
 * that makes a ConfigError. */
export type Problem = (field: string, problem: string, fix: string) => Error;
