// BullMQ side of `python bench/redis.py` (node 18+; BullMQ installed by
// `npm install --prefix bench/.node`). One case per process:
//   node bench/bullmq_side.mjs <case> <n> <redis-url>     case: add | bulk | process | w4
//   node bench/bullmq_side.mjs produce <rate> <seconds> <redis-url> <queue>
// Prints one JSON line {case, n, per_s | p50_ms, p99_ms}. Same ~100-byte payload as bunq.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { spawn } from "node:child_process";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, ".node", "package.json"));
const { Queue, Worker } = require("bullmq");

const payload = { user: 12345, email: "someone@example.com", template: "welcome-v2", pad: "x".repeat(40) };
const [kind, a1, a2, a3, a4] = process.argv.slice(2);

function conn(url) {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), db: Number(u.pathname.slice(1) || 0),
           maxRetriesPerRequest: null };
}

async function produce(rate, seconds, url, name) {
  const queue = new Queue(name, { connection: conn(url) });
  const start = performance.now();
  for (let i = 0; i < rate * seconds; i++) {
    const wait = start + (i * 1000) / rate - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await queue.add("job", { ...payload, t: performance.timeOrigin + performance.now() });
  }
  await queue.close();
}

async function main() {
  if (kind === "produce") {
    await produce(Number(a1), Number(a2), a3, a4);
    return;
  }
  const n = Number(a1);
  const url = a2;
  const name = `bench-${kind}-${Math.random().toString(36).slice(2, 8)}`;
  const queue = new Queue(name, { connection: conn(url) });
  const out = { case: kind, n };
  const fill = async () => {
    for (let i = 0; i < n; i += 1000) {
      await queue.addBulk(Array.from({ length: Math.min(1000, n - i) }, () => ({ name: "job", data: payload })));
    }
  };
  if (kind === "add") {
    const t = performance.now();
    for (let i = 0; i < n; i++) await queue.add("job", payload);
    out.per_s = Math.round(n / ((performance.now() - t) / 1000));
  } else if (kind === "bulk") {
    const t = performance.now();
    await fill();
    out.per_s = Math.round(n / ((performance.now() - t) / 1000));
  } else if (kind === "process") {
    await fill();
    let done = 0;
    const t = performance.now();
    let worker;
    await new Promise((resolve) => {
      worker = new Worker(name, async () => {
        if (++done === n) resolve();
        return null;
      }, { connection: conn(url), concurrency: 10 });
    });
    out.per_s = Math.round(n / ((performance.now() - t) / 1000));
    await worker.close();
  } else if (kind === "w4") {
    const rate = 1000, seconds = Number(a3 || 10);
    const lat = [];
    const worker = new Worker(name, async (job) => { lat.push(performance.timeOrigin + performance.now() - job.data.t); return null; },
                              { connection: conn(url), concurrency: 10 });
    await new Promise((r) => setTimeout(r, 300));
    await new Promise((resolve, reject) => {
      const p = spawn(process.execPath, [fileURLToPath(import.meta.url), "produce", String(rate),
                                         String(seconds), url, name], { stdio: "inherit" });
      p.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`producer exit ${code}`))));
    });
    await new Promise((r) => setTimeout(r, 500));
    await worker.close();
    lat.sort((x, y) => x - y);
    out.n = lat.length;
    out.p50_ms = lat[Math.floor(lat.length / 2)];
    out.p99_ms = lat[Math.floor(lat.length * 0.99)];
  }
  await queue.obliterate({ force: true });
  await queue.close();
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
