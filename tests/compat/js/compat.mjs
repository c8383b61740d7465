// bunqueue's own client (npm `bunqueue`, run with bun) against `bunq serve`.
// Usage: bun compat.mjs <port> [token]. Prints one JSON object; exit 0 when the scenario ran.
import { Queue, Worker } from 'bunqueue/client';

const port = Number(process.argv[2]);
const token = process.argv[3] || undefined;
const connection = { host: '127.0.0.1', port, token };
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const q = new Queue('compat-js', { connection });
const first = await q.add('first', { n: 0 }, { priority: 5 });
const slow = await q.add('slow', { slow: true });
const bad = await q.add('bad', { fail: true }, { attempts: 1 });
const bulk = await q.addBulk(Array.from({ length: 50 }, (_, i) => ({ name: 'bulk', data: { n: i + 1 } })));
out.ids = { first: first.id, slow: slow.id, bad: bad.id, bulk: bulk.length };
out.countsBefore = await q.getJobCountsAsync();
out.countBefore = await q.countAsync();

const seen = [];
const worker = new Worker('compat-js', async (job) => {
  seen.push(job.name);
  if (job.name === 'first') out.firstRunAttemptsMade = job.attemptsMade; // bunqueue: 0 on a first run
  if (job.data.fail) throw new Error('boom');
  if (job.data.slow) await sleep(1500); // longer than lockDuration: only heartbeats keep it
  return { double: (job.data.n ?? 0) * 2 };
}, { connection, concurrency: 5, lockDuration: 600, heartbeatInterval: 100 });

const deadline = Date.now() + 15000;
let counts = await q.getJobCountsAsync();
while (Date.now() < deadline && counts.completed + counts.failed < 53) {
  await sleep(50);
  counts = await q.getJobCountsAsync();
}
await worker.close();
out.countsAfter = counts;
out.seen = seen.length;
const slowJob = await q.getJob(slow.id);
out.slow = { state: await q.getJobState(slow.id), attempts: slowJob?.attemptsMade, returnvalue: slowJob?.returnvalue };
const firstJob = await q.getJob(first.id);
out.first = { name: firstJob?.name, returnvalue: firstJob?.returnvalue };
out.badState = await q.getJobState(bad.id);
out.missing = await q.getJob('no-such-job');
await q.close();
console.log(JSON.stringify(out));
process.exit(0);
