// bunqueue's FlowProducer + Worker (npm `bunqueue`, run with bun) against `bunq serve`:
// flows whose child fails, under each failure policy, and the config/group commands.
// Usage: bun flowfail.mjs <port> [token]. Prints one JSON object; exit 0 when the scenario ran.
import { FlowProducer, Queue, Worker } from 'bunqueue/client';

const port = Number(process.argv[2]);
const token = process.argv[3] || undefined;
const connection = { host: '127.0.0.1', port, token };
const out = { parents: {} };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const flow = new FlowProducer({ connection });
const qp = new Queue('ff-p', { connection });
const qc = new Queue('ff-c', { connection });
const boom = (opts = {}) => ({ name: 'boom', queueName: 'ff-c', data: { v: 0 },
                               opts: { attempts: 1, ...opts } });
const fine = (v, opts = {}) => ({ name: 'fine', queueName: 'ff-c', data: { v }, opts });
const parent = (name, children) => flow.add({ name, queueName: 'ff-p', data: {}, children });

const roots = {
  wait: await parent('wait', [boom()]),
  fail: await parent('fail', [boom({ failParentOnFailure: true })]),
  ignore: await parent('ignore', [boom({ ignoreDependencyOnFailure: true }), fine(7)]),
  remove: await parent('remove', [boom({ removeDependencyOnFailure: true })]),
  continue: await parent('continue', [boom({ continueParentOnFailure: true }),
                                      fine(9, { delay: 600000 })]),
};

const kids = new Worker('ff-c', async (job) => {
  if (job.name === 'boom') throw new Error('child broke');
  return { v: job.data.v };
}, { connection, concurrency: 4 });
const parents = new Worker('ff-p', async (job) => {
  out.parents[job.name] = {
    values: Object.values(await job.getChildrenValues()),
    failed: Object.values(await job.getFailedChildrenValues()),
    ignored: Object.values(await job.getIgnoredChildrenFailures()),
  };
  return 'ran';
}, { connection, concurrency: 1 });

const deadline = Date.now() + 15000;
while (Date.now() < deadline && Object.keys(out.parents).length < 3) await sleep(50);
await sleep(300); // give a wrongly released parent the time to run too
await kids.close();
await parents.close();
out.states = {};
for (const [name, tree] of Object.entries(roots)) {
  out.states[name] = await qp.getJobState(tree.job.id);
}

// the config and group commands the client exposes
await qp.setDlqConfigAsync({ maxAutoRetries: 5 });
out.dlqConfig = await qp.getDlqConfigAsync();
await qp.setStallConfigAsync({ stallInterval: 20000 });
out.groupConcurrency = await qp.getGroupConcurrency('g1');
out.groupPaused = await qp.isGroupPaused('g1');
try {
  await qp.pauseGroup('g1');
  out.pauseGroup = 'accepted';
} catch (err) {
  out.pauseGroup = String(err.message ?? err);
}

await flow.close();
await qp.close();
await qc.close();
console.log(JSON.stringify(out));
process.exit(0);
