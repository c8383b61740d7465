// Drive a server with bunqueue's own JS client (run with bun). Prints one JSON line.
// bun bunqueue_client.mjs pushb <port> <n> <batch>
// bun bunqueue_client.mjs drain <port> <n> <concurrency>
import { Queue, Worker } from 'bunqueue/client';

const [mode, portArg, nArg, kArg] = process.argv.slice(2);
const port = Number(portArg);
const n = Number(nArg);
const k = Number(kArg);
const connection = { host: '127.0.0.1', port };
const payload = { payload: 'x'.repeat(90) }; // ~100 bytes of msgpack
const now = () => performance.now();

async function fill(q, total, batch) {
  const lat = [];
  for (let done = 0; done < total; done += batch) {
    const size = Math.min(batch, total - done);
    const t = now();
    await q.addBulk(Array.from({ length: size }, () => ({ name: 'job', data: payload })));
    lat.push(now() - t);
  }
  return lat.sort((a, b) => a - b);
}

if (mode === 'pushb') {
  const q = new Queue(`pushb-${Date.now()}`, { connection });
  await fill(q, 1000, 1000); // warm-up, not timed
  const t0 = now();
  const lat = await fill(q, n, k);
  const secs = (now() - t0) / 1000;
  const pct = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))];
  console.log(JSON.stringify({ mode, n, batch: k, jobs_per_s: n / secs, seconds: secs,
    batch_ms_p50: pct(0.5), batch_ms_p99: pct(0.99) }));
  await q.close();
} else if (mode === 'drain') {
  const name = `drain-${k}-${Date.now()}`;
  const q = new Queue(name, { connection });
  await fill(q, n, 1000);
  let completed = 0;
  let t0 = 0;
  let finish;
  const done = new Promise((r) => { finish = r; });
  const w = new Worker(name, async () => null, { connection, concurrency: k, autorun: false });
  w.on('completed', () => { if (++completed === n) finish(); });
  t0 = now();
  w.run();
  await done;
  const secs = (now() - t0) / 1000;
  await w.close();
  const counts = await q.getJobCountsAsync();
  console.log(JSON.stringify({ mode, n, concurrency: k, jobs_per_s: n / secs, seconds: secs,
    completed: counts.completed, waiting: counts.waiting, active: counts.active }));
  await q.close();
} else {
  throw new Error(`unknown mode ${mode}`);
}
process.exit(0);
