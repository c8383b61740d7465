// bunqueue side of `python bench/engine.py --with-bunqueue` (run by bun in /tmp/bq,
// where `npm i bunqueue bun` installed bunqueue 2.9.5). One case per process:
//   bun bench/bunqueue_side.ts <case> <n> [dataPath]   case: add | bulk | process
// Prints one JSON line {case, n, per_s, rss_mb}. Embedded mode, ~100-byte payload;
// process = n queued jobs drained by a no-op Worker at concurrency 10.
import { Queue, Worker } from "bunqueue/client";

const [kind, nArg, dataPath] = process.argv.slice(2);
const n = Number(nArg ?? 100000);
const payload = { user: 12345, email: "someone@example.com", template: "welcome-v2", pad: "x".repeat(40) };
const opts: Record<string, unknown> = { embedded: true };
if (dataPath) opts.dataPath = dataPath;
const queue = new Queue(`bench-${kind}`, opts as any);

async function fill(): Promise<void> {
  for (let i = 0; i < n; i += 1000) {
    await queue.addBulk(Array.from({ length: 1000 }, () => ({ name: "job", data: payload })));
  }
}

let perS = 0;
if (kind === "add") {
  const t = performance.now();
  for (let i = 0; i < n; i++) await queue.add("job", payload);
  perS = n / ((performance.now() - t) / 1000);
} else if (kind === "bulk") {
  const t = performance.now();
  await fill();
  perS = n / ((performance.now() - t) / 1000);
} else {
  await fill();
  let done = 0;
  const t = performance.now();
  await new Promise<void>((resolve) => {
    const worker = new Worker(`bench-${kind}`, async () => {
      done++;
      if (done === n) resolve();
      return null;
    }, { embedded: true, concurrency: 10 } as any);
    void worker;
  });
  perS = n / ((performance.now() - t) / 1000);
}
console.log(JSON.stringify({ case: kind, n, per_s: Math.round(perS), rss_mb: Math.round(process.memoryUsage().rss / 1048576) }));
process.exit(0);
