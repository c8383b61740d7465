// bunqueue's FlowProducer (npm `bunqueue`, run with bun) against `bunq serve`: PUSHF graphs.
// Usage: bun flows.mjs <port> [token]. Prints one JSON object; exit 0 when the scenario ran.
import { FlowProducer, Queue, Worker } from 'bunqueue/client';

const port = Number(process.argv[2]);
const token = process.argv[3] || undefined;
const connection = { host: '127.0.0.1', port, token };
const out = {};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const names = (node) => ({ name: node.job.name, children: (node.children ?? []).map(names) });

const flow = new FlowProducer({ connection });
const qa = new Queue('flow-a', { connection });
const qb = new Queue('flow-b', { connection });

// add: a tree over two queues; every parent waits for its children
const tree = await flow.add({
  name: 'root', queueName: 'flow-a', data: { r: 1 },
  children: [
    { name: 'c1', queueName: 'flow-b', data: { c: 1 } },
    { name: 'c2', queueName: 'flow-b', data: { c: 2 },
      children: [{ name: 'g', queueName: 'flow-b', data: { g: 1 } }] },
  ],
});
const rootId = tree.job.id;
const c2Id = tree.children[1].job.id;
out.added = names(tree);
out.statesAfterAdd = {
  root: await qa.getJobState(rootId),
  c1: await qb.getJobState(tree.children[0].job.id),
  c2: await qb.getJobState(c2Id),
  g: await qb.getJobState(tree.children[1].children[0].job.id),
};
const read = await flow.getFlow({ id: rootId, queueName: 'flow-a' });
out.read = read ? names(read) : null;
out.readData = read ? read.job.data : null;

// addChain: each step after the previous one
const chain = await flow.addChain([
  { name: 's1', queueName: 'flow-a', data: { s: 1 } },
  { name: 's2', queueName: 'flow-a', data: { s: 2 } },
  { name: 's3', queueName: 'flow-a', data: { s: 3 } },
]);
out.chainStates = await Promise.all(chain.jobIds.map((id) => qa.getJobState(id)));

// rollback: one bad node (a queue name bunq refuses) and nothing of the graph is stored
try {
  await flow.add({
    name: 'rb-root', queueName: 'flow-a', data: {}, opts: { jobId: 'rb-root' },
    children: [
      { name: 'rb-ok', queueName: 'flow-b', data: {}, opts: { jobId: 'rb-ok' } },
      { name: 'rb-bad', queueName: 'bad queue!', data: {}, opts: { jobId: 'rb-bad' } },
    ],
  });
  out.rollback = 'accepted';
} catch (err) {
  out.rollback = String(err.message ?? err);
}
out.afterRollback = { root: await qa.getJob('rb-root'), ok: await qb.getJob('rb-ok') };

// run it: children before parents, the chain in order
const order = [];
const handler = async (job) => { order.push(job.name); return { done: job.name }; };
const wa = new Worker('flow-a', handler, { connection, concurrency: 1 });
const wb = new Worker('flow-b', handler, { connection, concurrency: 1 });
const deadline = Date.now() + 15000;
while (Date.now() < deadline && order.length < 7) await sleep(50);
await wa.close();
await wb.close();
out.order = order;
out.rootState = await qa.getJobState(rootId);
await flow.close();
await qa.close();
await qb.close();
console.log(JSON.stringify(out));
process.exit(0);
