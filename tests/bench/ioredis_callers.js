// ioredis_callers.js PORT MS -- the fenced cycle of bench_redis_cost part 4
// from node: the library's own scripts (issue.lua in front of acquire.lua,
// joined as the Redis issuer joins them in lib/lease/redis/rscripts.c, and
// release.lua), with the arguments libfence sends (MONITOR: clock tokens,
// jump 10 s, no limit, counters idle a day),
// by 1 and then 8 concurrent callers sharing ONE ioredis connection
// (ioredis pipelines the callers' commands on it), distinct names, for MS
// milliseconds each; 3 rounds ABAB, medians.  Prints
// ioredis_1caller_per_s, ioredis_8callers_per_s and their ratio.
// Run by bench_redis_cost with NODE_PATH at an npm-installed ioredis.
'use strict';
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const Redis = require('ioredis');

const port = Number(process.argv[2]);
const ms = Number(process.argv[3]);
const lua = (...fs_) => fs_.map((f) => fs.readFileSync(
  path.join(__dirname, '..', '..', 'lib', 'lease', 'redis', f), 'utf8')).join('\n');

async function main() {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0 });
  await r.connect();
  r.defineCommand('fenceAcquire', { numberOfKeys: 2, lua: lua('issue.lua', 'acquire.lua') });
  r.defineCommand('fenceRelease', { numberOfKeys: 1, lua: lua('release.lua') });

  async function caller(name, deadline) {
    const key = `fence:{${name}}`;
    let n = 0;
    while (Date.now() < deadline) {
      const owner = crypto.randomBytes(16).toString('hex');
      const a = await r.fenceAcquire(key, `${key}:token`, owner, '60000', 'clock',
                                     '10000000', '0', '86400000');
      if (!Array.isArray(a) || a[0] !== 1) throw new Error(`acquire refused: ${a}`);
      const d = await r.fenceRelease(key, `${owner}:${a[1]}`, `${key}:released`);
      if (d !== 1) throw new Error('release did not delete');
      n++;
    }
    return n;
  }
  async function round(callers, tag) {
    const t0 = process.hrtime.bigint();
    const deadline = Date.now() + ms;
    const counts = await Promise.all(Array.from({ length: callers },
      (_, i) => caller(`bench-ioredis-${process.pid}-${tag}-${i}`, deadline)));
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    return counts.reduce((x, y) => x + y, 0) / s;
  }
  const med = (v) => v.slice().sort((x, y) => x - y)[Math.floor(v.length / 2)];
  await round(8, 'warm');
  const one = [], eight = [];
  for (let i = 0; i < 3; i++) {
    one.push(await round(1, `1-${i}`));
    eight.push(await round(8, `8-${i}`));
  }
  console.log(`ioredis_1caller_per_s ${med(one).toFixed(0)} cycles/s`);
  console.log(`ioredis_8callers_per_s ${med(eight).toFixed(0)} cycles/s`);
  console.log(`ioredis_8callers_vs_1caller_ratio ${(med(eight) / med(one)).toFixed(2)} x`);
  r.disconnect();
}
main().catch((e) => { console.error(`ioredis_callers.js: ${e.message}`); process.exit(1); });
