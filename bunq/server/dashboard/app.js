// bunq dashboard: hash-routed views over the HTTP API (no build step, no network but this server).
import { api, events } from "./api.js";
import { LineChart } from "./charts.js";

const $ = (sel, root = document) => root.querySelector(sel);
const view = $("#view");
const STATES = ["waiting", "active", "delayed", "completed", "failed", "waiting-children"];
const enc = encodeURIComponent;

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
const json = (v) => `<pre class="mono">${esc(JSON.stringify(v, null, 2))}</pre>`;
const when = (ms) => (ms ? new Date(ms).toLocaleString() : "—");
const badge = (s) => `<span class="badge ${esc(s)}">${esc(s)}</span>`;

function toast(text) {
  const t = document.createElement("div");
  t.className = "toast"; t.textContent = text;
  document.body.append(t);
  setTimeout(() => t.remove(), 2500);
}

async function act(label, fn) {
  try { await fn(); toast(label); } catch (e) { toast(`${label} failed: ${e.message}`); }
  render();
}

// -- live data: one SSE stream for the whole page ----------------------------------------
const live = { last: null, onTick: null, onJob: null };
events("/events", (kind, data) => {
  if (kind === "stats") {
    const prev = live.last;
    live.last = data;
    if (prev && live.onTick) {
      const dt = Math.max((data.time - prev.time) / 1000, 0.001);
      live.onTick({
        pushed: (data.pushed - prev.pushed) / dt,
        completed: (data.completed - prev.completed) / dt,
        failed: (data.failed - prev.failed) / dt,
      });
    }
  } else if (kind === "job" && live.onJob) live.onJob(data);
}, (on) => $("#live").classList.toggle("on", on));

let refreshTimer = null;
function soon(fn) { // at most one refresh per 500 ms however many events arrive
  if (!refreshTimer) refreshTimer = setTimeout(() => { refreshTimer = null; fn(); }, 500);
}

// -- views ---------------------------------------------------------------------------------
const charts = { throughput: null, failures: null };

async function overview() {
  view.innerHTML = `<h1>Overview</h1>
    <div class="cards">
      <div class="card"><h3>Throughput (jobs/s)</h3><div class="legend"><span><i class="l0"></i>added</span><span><i class="l1"></i>completed</span></div><canvas id="chart-throughput"></canvas></div>
      <div class="card"><h3>Failure rate (failed/s)</h3><div class="legend"><span><i class="l2"></i>failed</span></div><canvas id="chart-failures"></canvas></div>
    </div>
    <h2>Queues</h2><div id="queues"></div>`;
  const t = new LineChart($("#chart-throughput"), ["added", "completed"], ["#2f6fde", "#1e9e5a"]);
  const f = new LineChart($("#chart-failures"), ["failed"], ["#d64545"]);
  if (charts.throughput) { t.data = charts.throughput.data; f.data = charts.failures.data; }
  charts.throughput = t; charts.failures = f;
  t.draw(); f.draw();
  live.onTick = (r) => { t.push([r.pushed, r.completed]); f.push([r.failed]); };
  live.onJob = () => soon(loadQueues);
  await loadQueues();
}

async function loadQueues() {
  const box = $("#queues");
  if (!box) return;
  const { queues } = await api("GET", "/queues?limit=1000");
  if (!queues.length) { box.innerHTML = `<div class="empty">No queues yet. Add a job and it shows here.</div>`; return; }
  box.innerHTML = `<table id="queue-table"><thead><tr><th>Queue</th>${STATES.map((s) => `<th class="num">${s}</th>`).join("")}<th>State</th><th></th></tr></thead><tbody>
    ${queues.map((q) => `<tr data-queue="${esc(q.name)}"><td><a href="#/queue/${enc(q.name)}">${esc(q.name)}</a></td>
      ${STATES.map((s) => `<td class="num" data-state="${s}"><a href="#/queue/${enc(q.name)}/${s}">${q.counts[s] ?? 0}</a></td>`).join("")}
      <td>${q.paused ? badge("paused") : badge("running")}</td>
      <td><a href="#/dlq/${enc(q.name)}">DLQ</a></td></tr>`).join("")}
    </tbody></table>`;
}

const pages = {}; // queue/state -> stack of cursors (for "previous")

async function queuePage(name, state = "waiting", cursor = "") {
  const key = `${name}/${state}`;
  const stack = pages[key] || (pages[key] = []);
  const q = await api("GET", `/queues/${enc(name)}`);
  const page = await api("GET", `/queues/${enc(name)}/jobs/list?state=${state}&limit=25${cursor ? `&cursor=${enc(cursor)}` : ""}`);
  const c = q.queue.counts;
  view.innerHTML = `<h1>Queue ${esc(name)} ${q.queue.paused ? badge("paused") : ""}</h1>
    <div class="bar">
      <button id="pause">${q.queue.paused ? "Resume" : "Pause"}</button>
      <button id="drain" class="danger">Drain</button>
      <a href="#/dlq/${enc(name)}">Dead letters (${q.queue.dlq})</a>
      <span class="muted">concurrency ${q.limits.concurrency ?? "∞"} · rate ${q.limits.rateLimit ?? "∞"}/${q.limits.rateDuration} ms</span>
    </div>
    <div class="tabs">${STATES.map((s) => `<a class="${s === state ? "active" : ""}" href="#/queue/${enc(name)}/${s}">${s} (${c[s] ?? 0})</a>`).join("")}</div>
    ${jobTable(page.jobs)}
    <div class="bar"><button id="prev" ${stack.length ? "" : "disabled"}>Previous</button><button id="next" ${page.next ? "" : "disabled"}>Next</button></div>`;
  $("#pause").onclick = () => act(q.queue.paused ? "resumed" : "paused", () => api("POST", `/queues/${enc(name)}/${q.queue.paused ? "resume" : "pause"}`));
  $("#drain").onclick = () => confirm(`Remove every waiting and delayed job of ${name}?`) && act("drained", () => api("POST", `/queues/${enc(name)}/drain`));
  $("#next").onclick = () => { stack.push(cursor); queuePage(name, state, page.next); };
  $("#prev").onclick = () => queuePage(name, state, stack.pop() || "");
  live.onJob = (ev) => ev.queue === name && !cursor && soon(() => location.hash.startsWith(`#/queue/${enc(name)}`) && queuePage(name, state));
}

function jobTable(jobs) {
  if (!jobs.length) return `<div class="empty">No jobs here.</div>`;
  return `<table id="job-table"><thead><tr><th>Id</th><th>Name</th><th>State</th><th class="num">Attempts</th><th class="num">Progress</th><th>Created</th></tr></thead><tbody>
    ${jobs.map((j) => `<tr><td class="mono"><a href="#/job/${enc(j.id)}">${esc(j.id)}</a></td><td>${esc(j.name)}</td><td>${badge(j.state)}</td>
      <td class="num">${j.attempts}/${j.maxAttempts}</td><td class="num">${j.progress}%</td><td>${when(j.createdAt)}</td></tr>`).join("")}
    </tbody></table>`;
}

async function jobPage(id) {
  const { job } = await api("GET", `/jobs/${enc(id)}`);
  const [logs, kids] = await Promise.all([
    api("GET", `/jobs/${enc(id)}/logs`), api("GET", `/jobs/${enc(id)}/children`)]);
  const opts = { priority: job.priority, maxAttempts: job.maxAttempts, backoff: job.backoffConfig, timeout: job.timeout,
    ttl: job.ttl, customId: job.customId, uniqueKey: job.uniqueKey, groupId: job.groupId, dependsOn: job.dependsOn,
    parentId: job.parentId, lifo: job.lifo, removeOnComplete: job.removeOnComplete, removeOnFail: job.removeOnFail, durable: job.durable };
  view.innerHTML = `<h1>Job <span class="mono">${esc(job.id)}</span> ${badge(job.state)}</h1>
    <div class="bar">
      <a href="#/queue/${enc(job.queue)}">← ${esc(job.queue)}</a>
      <button id="retry">Retry</button><button id="promote">Promote</button><button id="remove" class="danger">Remove</button>
    </div>
    <div class="cards">
      <div class="card"><h3>Summary</h3><dl class="kv">
        <dt>Name</dt><dd>${esc(job.name)}</dd>
        <dt>Progress</dt><dd><progress id="job-progress" max="100" value="${job.progress}"></progress> <span id="job-progress-text">${job.progress}%</span></dd>
        <dt>Attempts</dt><dd>${job.attempts} of ${job.maxAttempts}</dd>
        <dt>Created</dt><dd>${when(job.createdAt)}</dd>
        <dt>Runs at</dt><dd>${when(job.runAt)}</dd>
        <dt>Started</dt><dd>${when(job.startedAt)}</dd>
        <dt>Finished</dt><dd>${when(job.completedAt)}</dd>
        ${job.failedReason ? `<dt>Error</dt><dd class="error">${esc(job.failedReason)}</dd>` : ""}
      </dl></div>
      <div class="card"><h3>Data</h3>${json(job.data)}</div>
      <div class="card"><h3>Result</h3>${json(job.returnvalue)}</div>
      <div class="card"><h3>Options</h3>${json(opts)}</div>
    </div>
    <h2>Attempts</h2>
    ${job.timeline.length ? `<table id="attempts"><thead><tr><th>#</th><th>When</th><th>Error</th></tr></thead><tbody>${job.timeline.map((a) => `<tr><td>${a.attempt}</td><td>${when(a.timestamp)}</td><td class="error mono">${esc(a.error)}</td></tr>`).join("")}</tbody></table>` : `<div class="empty">No failed attempts.</div>`}
    <h2>Logs (${logs.count})</h2>
    <div id="job-logs">${logs.logs.length ? `<pre class="mono">${logs.logs.map((l) => esc(l.message)).join("\n")}</pre>` : `<div class="empty">No log lines.</div>`}</div>
    <h2>Children (${kids.children.length})</h2>
    ${kids.children.length ? `<table><thead><tr><th>Id</th><th>State</th><th>Result</th></tr></thead><tbody>${kids.children.map((k) => `<tr><td class="mono"><a href="#/job/${enc(k.id)}">${esc(k.id)}</a></td><td>${badge(k.state)}</td><td class="mono">${esc(JSON.stringify(k.result))}</td></tr>`).join("")}</tbody></table>` : `<div class="empty">No children.</div>`}`;
  $("#retry").onclick = () => act("retried", () => api("POST", `/jobs/${enc(id)}/retry`));
  $("#promote").onclick = () => act("promoted", () => api("POST", `/jobs/${enc(id)}/promote`));
  $("#remove").onclick = () => confirm("Remove this job?") && act("removed", () => api("DELETE", `/jobs/${enc(id)}`));
  live.onJob = (ev) => ev.jobId === id && soon(() => location.hash === `#/job/${enc(id)}` && jobPage(id));
}

async function dlqPage(name) {
  const { entries, total } = await api("GET", `/queues/${enc(name)}/dlq?limit=100`);
  view.innerHTML = `<h1>Dead letters of <a href="#/queue/${enc(name)}">${esc(name)}</a> <span class="muted">(${total})</span></h1>
    <div class="bar"><button id="retry-all" class="primary" ${total ? "" : "disabled"}>Retry all</button><button id="purge" class="danger" ${total ? "" : "disabled"}>Purge</button></div>
    ${entries.length ? `<table id="dlq-table"><thead><tr><th>Id</th><th>Name</th><th>Reason</th><th>Error</th><th>Entered</th><th></th></tr></thead><tbody>
      ${entries.map((e) => `<tr data-id="${esc(e.job.id)}"><td class="mono"><a href="#/job/${enc(e.job.id)}">${esc(e.job.id)}</a></td><td>${esc(e.job.name)}</td><td>${esc(e.reason)}</td>
        <td class="error mono">${esc(e.error)}</td><td>${when(e.enteredAt)}</td>
        <td><button class="retry-one" data-id="${esc(e.job.id)}">Retry</button></td></tr>`).join("")}</tbody></table>` : `<div class="empty">The dead-letter queue is empty.</div>`}`;
  $("#retry-all").onclick = () => act("retried", () => api("POST", `/queues/${enc(name)}/dlq/retry`, {}));
  $("#purge").onclick = () => confirm(`Delete all ${total} dead letters?`) && act("purged", () => api("POST", `/queues/${enc(name)}/dlq/purge`));
  view.querySelectorAll(".retry-one").forEach((b) => {
    b.onclick = () => act("retried", () => api("POST", `/queues/${enc(name)}/dlq/retry`, { jobId: b.dataset.id }));
  });
}

async function cronPage() {
  const { crons } = await api("GET", "/crons");
  view.innerHTML = `<h1>Schedules</h1>
    <form id="cron-form" class="inline">
      <input name="name" placeholder="name" required><input name="queue" placeholder="queue" required>
      <input name="schedule" placeholder="cron pattern (*/5 * * * *)"><input name="repeatEvery" type="number" placeholder="or every (ms)">
      <button class="primary">Add</button></form>
    ${crons.length ? `<table id="cron-table"><thead><tr><th>Name</th><th>Queue</th><th>Schedule</th><th>Next run</th><th class="num">Runs</th><th></th></tr></thead><tbody>
      ${crons.map((c) => `<tr><td>${esc(c.name)}</td><td><a href="#/queue/${enc(c.queue)}">${esc(c.queue)}</a></td><td class="mono">${esc(c.schedule ?? `every ${c.repeatEvery} ms`)}</td>
        <td>${when(c.nextRun)}</td><td class="num">${c.executions}</td><td><button class="danger del" data-name="${esc(c.name)}">Delete</button></td></tr>`).join("")}</tbody></table>` : `<div class="empty">No schedules.</div>`}`;
  $("#cron-form").onsubmit = (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const body = { name: f.get("name"), queue: f.get("queue") };
    if (f.get("schedule")) body.schedule = f.get("schedule"); else body.repeatEvery = Number(f.get("repeatEvery"));
    act("schedule saved", () => api("POST", "/crons", body));
  };
  view.querySelectorAll(".del").forEach((b) => {
    b.onclick = () => act("schedule deleted", () => api("DELETE", `/crons/${enc(b.dataset.name)}`));
  });
}

async function workersPage() {
  const { workers } = await api("GET", "/workers");
  view.innerHTML = `<h1>Workers</h1>
    ${workers.length ? `<table id="worker-table"><thead><tr><th>Id</th><th>Name</th><th>Host</th><th>Queues</th><th class="num">Active</th><th>Last seen</th></tr></thead><tbody>
      ${workers.map((w) => `<tr><td class="mono">${esc(w.id)}</td><td>${esc(w.name)}</td><td>${esc(w.hostname)}</td><td>${esc((w.queues || []).join(", "))}</td>
        <td class="num">${esc(w.activeJobs ?? "")}</td><td>${when(w.lastSeen)}</td></tr>`).join("")}</tbody></table>` : `<div class="empty">No worker has registered with this server.</div>`}`;
}

// -- routing ---------------------------------------------------------------------------------
async function render() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  live.onTick = null; live.onJob = null;
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === (parts[0] || "overview")));
  try {
    if (parts[0] === "queue") await queuePage(parts[1], parts[2] || "waiting");
    else if (parts[0] === "job") await jobPage(parts[1]);
    else if (parts[0] === "dlq") await dlqPage(parts[1]);
    else if (parts[0] === "crons") await cronPage();
    else if (parts[0] === "workers") await workersPage();
    else await overview();
  } catch (e) {
    view.innerHTML = `<div class="empty error" id="error">${esc(e.message)}</div>`;
  }
}

$("#search").onsubmit = async (ev) => {
  ev.preventDefault();
  const q = $("#search-input").value.trim();
  if (!q) return;
  const { jobs } = await api("GET", `/jobs/search?q=${enc(q)}`);
  if (jobs.length) location.hash = `#/job/${enc(jobs[0].id)}`;
  else toast(`no job ${q}`);
};
window.addEventListener("hashchange", render);
render();
