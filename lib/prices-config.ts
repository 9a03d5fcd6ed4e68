import { readFileSync } from 'fs';
import * as path from 'path';
import { Problem } from './config-error';

/** The list prices each run's cost is computed with: one table, docs/costs/prices.json, with
 * each price's source and the month it was checked. A config's `prices:` overrides any of them
 * by name (another Region, a negotiated rate); `raidsnap status <run> --config <file>` reads
 * the same section. The stack itself does not use them. */
export const PRICE_TABLE = path.join(__dirname, '..', 'docs', 'costs', 'prices.json');

export type PricesConfig = Readonly<Record<string, number>>;

export function knownPrices(): string[] {
  return Object.keys(JSON.parse(readFileSync(PRICE_TABLE, 'utf8')).prices as Record<string, unknown>);
}

/** `prices:`: a mapping of a known price's name to a non-negative number of US dollars. */
export function parsePrices(raw: unknown, problem: Problem): PricesConfig | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw problem('prices', 'is not a mapping', 'write price names and US dollars, e.g. prices: {fsrDsuHour: 0.9}');
  }
  const known = knownPrices();
  const out: Record<string, number> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (!known.includes(name)) {
      throw problem(`prices.${name}`, 'is no price raidsnap knows', `use one of ${known.join(', ')} (docs/costs/prices.json)`);
    }
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw problem(`prices.${name}`, 'is not a number of US dollars, 0 or more', 'write the price in US dollars, e.g. 0.9');
    }
    out[name] = value as number;
  }
  return out;
}

/** The table a run's cost is computed with, for a function's RUN_PRICES: each price's US
 * dollars (a config's override instead, its source then saying so), what is included, its
 * source, the Region and month. Compact: a function's environment holds 4 KB in all. */
export function runPriceTable(overrides: PricesConfig | undefined): string {
  const table = JSON.parse(readFileSync(PRICE_TABLE, 'utf8'));
  const prices: Record<string, Record<string, unknown>> = {};
  for (const [name, p] of Object.entries(table.prices as Record<string, Record<string, unknown>>)) {
    const overridden = overrides?.[name] !== undefined;
    prices[name] = {
      usd: overridden ? overrides![name] : p.usd,
      source: overridden ? 'the config' : p.source,
      ...(p.included !== undefined ? { included: p.included } : {}),
    };
  }
  return JSON.stringify({
    region: table.region, checked: table.checked, hoursPerMonth: { value: table.hoursPerMonth.value }, prices,
  });
}
