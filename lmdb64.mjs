import { open } from 'lmdb';
import { mkdtempSync, openSync, writeSync, rmSync } from 'node:fs';
const [size = 65536, ring = 1000, per = 1, commits = 4000] = process.argv.slice(2).map(Number);
const dir = mkdtempSync('/tmp/lmdb64-');
const root = open({ path: dir, noSubdir: false, maxDbs: 8, compression: false, noSync: true });
const slots = root.openDB({ name: 'capture-slots', encoding: 'binary' });
const value = Buffer.alloc(size, 0x61);
let seq = 0;
function commit() {
  root.transactionSync(() => {
    for (let i = 0; i < per; i++) { const s = seq++; slots.put([7, s % ring], value); }
  });
}
for (let i = 0; i < ring * 2 / per; i++) commit();
let t = process.cpuUsage(); let w = process.hrtime.bigint();
for (let i = 0; i < commits; i++) commit();
let d = process.cpuUsage(t); let wall = Number(process.hrtime.bigint() - w) / 1000;
const n = commits * per;
console.log(`lmdb size ${size} ring ${ring} per ${per}: ${((d.user + d.system) / n).toFixed(1)} µs/capture (user ${(d.user / n).toFixed(1)}, sys ${(d.system / n).toFixed(1)}), wall ${(wall / n).toFixed(1)}`);
// floor: pwrite the same bytes into a ring of a plain file
const fd = openSync(dir + '/plain', 'w+');
for (let i = 0; i < ring; i++) writeSync(fd, value, 0, size, i * size);
t = process.cpuUsage();
for (let i = 0; i < n; i++) writeSync(fd, value, 0, size, (i % ring) * size);
d = process.cpuUsage(t);
console.log(`pwrite floor: ${((d.user + d.system) / n).toFixed(1)} µs/write (user ${(d.user / n).toFixed(1)}, sys ${(d.system / n).toFixed(1)})`);
rmSync(dir, { recursive: true });
