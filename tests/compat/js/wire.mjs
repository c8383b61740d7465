// bunqueue's JS client (npm `bunqueue`, run with bun) against `bunq serve`: wire details
// its users rely on (issue 21): stacks on FAIL, RateLimit with a ttl, obliterate with
// active jobs, 1 MB+ payloads. Usage: bun wire.mjs <port> [token]. Prints one JSON object.
import { Queue, Worker } from 'bunqueue/client';

const port = Number(process.argv[2]);
const token = process.argv[3] || undefined;
const connection = { host: '127.0.0.1', port, token };
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const until = async (pred, ms = 10000) => {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && !(await pred())) await sleep(25);
};

// stacks: a FAIL carries err.stack; GetJob returns it, at most stackTraceLimit lines
const qs = new Queue('wire-stack', { connection });
const short = await qs.add('short', { n: 1 }, { attempts: 1, stackTraceLimit: 2 });
const full = await qs.add('full', { n: 2 }, { attempts: 1 });
function inner() { throw new Error('boom'); }
function outer() { inner(); }
const ws = new Worker('wire-stack', async () => { outer(); }, { connection });
await until(async () => (await qs.getJobCountsAsync()).failed === 2);
await ws.close();
for (const [key, job] of [['short', short], ['full', full]]) {
  const got = await qs.getJob(job.id);
  out[key] = { stacktrace: got?.stacktrace ?? null, failedReason: got?.failedReason ?? null };
}

// rateLimit(ms): the limit (1 job a second) lapses after the ttl, broker-side
const qr = new Queue('wire-rate', { connection });
await qr.rateLimit(700);
out.limitSet = await qr.getGlobalRateLimit();
await sleep(1000);
out.limitAfterTtl = await qr.getGlobalRateLimit();

// obliterate removes the queue even while one of its jobs is active
const qo = new Queue('wire-obl', { connection });
await qo.add('a', { n: 1 });
await qo.add('b', { n: 2 });
let release;
const held = new Promise((r) => { release = r; });
let started = false;
const wo = new Worker('wire-obl', async () => { started = true; await held; return 'late'; }, { connection });
await until(async () => started);
await qo.obliterateAsync();
out.countsAfterObliterate = await qo.getJobCountsAsync();
release();
await sleep(300);
await wo.close();
out.countsAtEnd = await qo.getJobCountsAsync();

// payloads past 1 MiB (bunqueue takes up to 10 MB of data)
const qp = new Queue('wire-big', { connection });
const big = await qp.add('big', { blob: 'x'.repeat(3 * 1024 * 1024) });
const gotBig = await qp.getJob(big.id);
out.bigLength = gotBig?.data?.blob?.length ?? null;

for (const q of [qs, qr, qo, qp]) await q.close();
console.log(JSON.stringify(out));
process.exit(0);
