/**
 * `--request-header-add/-remove` and `--response-header-add/-remove`: edits of a flat [name, value, ...]
 * field list. Names compare case-insensitively; an added header replaces any the message already had
 * under that name (so a public client cannot send a value the rule is meant to set); the order of the
 * other fields and the case of their names are kept.
 */
export class HeaderRules {
  private readonly drop: Set<string>;
  private readonly add: readonly string[];

  constructor(add: readonly (readonly [string, string])[], remove: readonly string[]) {
    this.drop = new Set([...remove, ...add.map(([name]) => name)].map((name) => name.toLowerCase()));
    this.add = add.flatMap(([name, value]) => [name, value]);
  }

  get empty(): boolean {
    return this.drop.size === 0;
  }

  /** The edited list; `extra` pairs are appended (the signed-in e-mail). */
  apply(fields: readonly string[], extraDrop?: ReadonlySet<string>, extra?: readonly string[]): string[] {
    const out: string[] = [];
    for (let i = 0; i < fields.length; i += 2) {
      const lower = fields[i]!.toLowerCase();
      if (this.drop.has(lower) || (extraDrop !== undefined && extraDrop.has(lower))) continue;
      out.push(fields[i]!, fields[i + 1]!);
    }
    for (const item of this.add) out.push(item);
    if (extra !== undefined) for (const item of extra) out.push(item);
    return out;
  }
}
