// Per-job operations from bunqueue's own client against `bunq serve`: promote,
// change priority, retry completed, plus remove (Cancel), update, change delay, discard.
// Usage: bun jobops.mjs <port> [token]. Prints one JSON object; exit 0 when the scenario ran.
import { Queue, Worker } from 'bunqueue/client';

const port = Number(process.argv[2]);
const token = process.argv[3] || undefined;
const connection = { host: '127.0.0.1', port, token };
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const q = new Queue('compat-jobops', { connection });
const later = await q.add('later', { n: 1 }, { delay: 60000 });
const later2 = await q.add('later2', { n: 2 }, { delay: 60000 });
out.delayed = await q.getJobState(later.id);
await q.promoteJob(later.id);
out.promoted = await q.getJobState(later.id);
out.promotedMany = await q.promoteJobs({ count: 10 });
out.later2 = await q.getJobState(later2.id);

const low = await q.add('low', { n: 3 }, { priority: 1 });
await q.add('high', { n: 4 }, { priority: 5 });
await q.changeJobPriority(low.id, { priority: 10 });

const edited = await q.add('edited', { n: 5 });
await q.updateJobData(edited.id, { n: 50 });
const parked = await q.add('parked', { n: 6 });
await q.changeJobDelay(parked.id, 60000);
out.parked = await q.getJobState(parked.id);
out.perPriority = await q.getCountsPerPriorityAsync();
const gone = await q.add('gone', { n: 7 });
await q.removeAsync(gone.id);
out.gone = await q.getJob(gone.id);

async function runAll(expected) {
  const seen = [];
  const worker = new Worker('compat-jobops', async (job) => {
    seen.push({ name: job.name, n: job.data.n, attemptsMade: job.attemptsMade });
    return job.data.n;
  }, { connection, concurrency: 1 });
  const deadline = Date.now() + 15000;
  while (Date.now() < deadline && seen.length < expected) await sleep(50);
  await worker.close();
  return seen;
}

const first = await runAll(5);
out.order = first.map((j) => j.name);
out.editedData = first.find((j) => j.name === 'edited')?.n;
out.countsDone = await q.getJobCountsAsync();

await q.retryJobs({ state: 'completed' });
out.lowAfterRetry = await q.getJobState(low.id);
out.countsRetried = await q.getJobCountsAsync();
const second = await runAll(5);
out.secondRun = second.length;
out.countsFinal = await q.getJobCountsAsync();
await q.close();
console.log(JSON.stringify(out));
process.exit(0);
