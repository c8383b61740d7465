// bunqueue's client cancels a job a bunq Worker is running: `removeAsync` sends Cancel,
// which bunq serve turns into a cancel request the worker sees (docs/events.md).
// Usage: bun cancel.mjs <port> [token]; the job's id is `cancel-me`. Prints one JSON object.
import { Queue } from 'bunqueue/client';

const port = Number(process.argv[2]);
const token = process.argv[3] || undefined;
const connection = { host: '127.0.0.1', port, token };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = {};

const q = new Queue('compat-cancel', { connection });
out.before = await q.getJobState('cancel-me');
await q.removeAsync('cancel-me');
const deadline = Date.now() + 15000;
let state = out.before;
while (Date.now() < deadline && state === 'active') {
  await sleep(50);
  state = await q.getJobState('cancel-me');
}
out.after = state;
await q.close();
console.log(JSON.stringify(out));
process.exit(0);
