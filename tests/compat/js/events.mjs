// bunqueue's own QueueEvents (npm `bunqueue`, run with bun) listening to `bunq serve`.
// Usage: bun events.mjs <port> [token]. Prints one JSON object; exit 0 when the scenario ran.
import { Queue, QueueEvents, Worker } from 'bunqueue/client';

const port = Number(process.argv[2]);
const token = process.argv[3] || undefined;
const connection = { host: '127.0.0.1', port, token };
const name = 'compat-events';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const events = new QueueEvents(name, { connection });
const seen = { waiting: [], active: [], completed: [], failed: [], progress: [], retried: [] };
const errors = [];
for (const kind of Object.keys(seen)) events.on(kind, (e) => seen[kind].push(e));
events.on('error', (e) => errors.push(String(e)));
await events.waitUntilReady();

// a second listener, on another queue: it must hear nothing of this one
const elsewhere = new QueueEvents('compat-events-other', { connection });
const heardElsewhere = [];
elsewhere.on('completed', (e) => heardElsewhere.push(e));
await elsewhere.waitUntilReady();

const q = new Queue(name, { connection });
const ok = [await q.add('ok', { n: 0 })];
ok.push(...(await q.addBulk([1, 2].map((n) => ({ name: 'ok', data: { n } })))));
const bad = await q.add('bad', { fail: true }, { attempts: 1 });
const flaky = await q.add('flaky', { flaky: true }, { attempts: 2, backoff: 1 });

// job.waitUntilFinished over TCP sends WaitJob; started before any worker runs
const waited = ok[1].waitUntilFinished(events, 10000);
const waitedBad = bad.waitUntilFinished(events, 10000).then(
  (v) => ({ resolved: v }),
  (e) => ({ rejected: String(e) }),
);

const tried = new Set();
const worker = new Worker(name, async (job) => {
  if (job.data.fail) throw new Error('boom');
  if (job.data.flaky && !tried.has(job.id)) {
    tried.add(job.id);
    throw new Error('first try fails');
  }
  await job.updateProgress(50);
  return { double: (job.data.n ?? 10) * 2 };
}, { connection, concurrency: 2 });

// queue.waitJobUntilFinished(id, queueEvents) resolves from the `completed` event
const finished = await q.waitJobUntilFinished(ok[0].id, events, 10000);
const waitedResult = await waited;
const waitedFailure = await waitedBad;
const t0 = Date.now();
const waitedAgain = await ok[1].waitUntilFinished(events, 10000); // finished: answered at once
const againMs = Date.now() - t0;

const deadline = Date.now() + 10000;
while (Date.now() < deadline && (seen.completed.length < 4 || seen.failed.length < 2)) await sleep(25);
await worker.close();
await sleep(100);
const ids = { ok: ok.map((j) => j.id), bad: bad.id, flaky: flaky.id };
console.log(
  JSON.stringify({
    ids, seen, finished, errors, heardElsewhere, waitedResult, waitedFailure, waitedAgain, againMs,
  }),
);
events.close();
elsewhere.close();
await q.close();
process.exit(0);
