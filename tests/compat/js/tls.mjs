// bunqueue's client over TLS against `bunq serve --tls-cert`.
// Usage: bun tls.mjs <port> <caFile>. Prints one JSON object; exit 0 when the scenario ran.
import { Queue, Worker } from 'bunqueue/client';

const port = Number(process.argv[2]);
const connection = { host: '127.0.0.1', port, tls: { caFile: process.argv[3] } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};

const q = new Queue('compat-tls', { connection });
const job = await q.add('secret', { n: 21 });
out.waiting = (await q.getJobCountsAsync()).waiting;
const worker = new Worker('compat-tls', async (j) => j.data.n * 2, { connection });
const deadline = Date.now() + 15000;
while (Date.now() < deadline && (await q.getJobState(job.id)) !== 'completed') await sleep(50);
await worker.close();
out.state = await q.getJobState(job.id);
out.result = (await q.getJob(job.id))?.returnvalue;
await q.close();
console.log(JSON.stringify(out));
process.exit(0);
