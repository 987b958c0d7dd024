// A node:test reporter that prints nothing until the run ends, then names every failed test with its
// file and error. CI keeps only the tail of the output; the TAP stream names a failure where it happened,
// which may be thousands of lines up.
export default async function* failuresReporter(source) {
  const failures = [];
  for await (const event of source) {
    if (event.type !== 'test:fail') continue;
    const { name, file, line, details } = event.data;
    // A file or suite fails because a test in it failed; the test itself is the line worth reading.
    if (details?.error?.failureType === 'subtestsFailed') continue;
    const error = details?.error;
    const cause = error?.cause ?? error;
    const message = String(cause?.message ?? cause ?? 'failed').split('\n').slice(0, 12).join('\n    ');
    failures.push(`- ${name}\n    at ${file ?? '?'}${line ? `:${line}` : ''}\n    ${message}`);
  }
  if (failures.length === 0) return;
  yield `\n# ${failures.length} failed:\n${failures.join('\n')}\n`;
}
