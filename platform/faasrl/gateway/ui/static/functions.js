// Functions and containers: every function with its containers by state, warm and cold
// invocations, errors and run times; the node's capacity; one function's manifest, containers
// recent invocations and dead letters (asynchronous invocations that failed for good).

import { get, post } from "./api.js";
import { badge, fields, h, link, num, pre, seconds, table, when } from "./dom.js";
import { invocationColumns, logText } from "./invocations.js";

const STATES = ["starting", "idle", "busy", "stopping"];

function capacity(cluster) {
  const { capacity: total, reserved, free } = cluster;
  const used = (k) => `${num(reserved[k])} used, ${num(free[k])} free of ${num(total[k])}`;
  return h("div", { id: "capacity" }, h("h2", {}, `Node capacity (${cluster.backend} backend)`),
    fields([["CPU (cores)", used("cpu")], ["memory (MB)", used("memory_mb")],
            ["GPUs", used("gpus")]]));
}

// Memory against its limits and what the invocation records take, from /healthz: while memory
// is short the gateway sheds what can wait (new async invocations, pre-warming, archiving).
function memory(health) {
  const { memory: m, records: r } = health;
  const shares = Object.entries(m.shares).map(([k, v]) => `${k} ${(v * 100).toFixed(1)}%`);
  const state = m.state === "shedding"
    ? `shedding (past ${(m.shed_at * 100).toFixed(0)}%: new async invocations and pre-warming ` +
      "refused, records not archived)"
    : `ok (sheds past ${(m.shed_at * 100).toFixed(0)}%)`;
  const archive = r.archive
    ? `${num(r.archived)} archived (${r.archive.days} days, ${num(r.archive.max_mb)} MB at most)`
    : "no archive";
  return h("div", { id: "memory" }, h("h2", {}, "Memory"),
    fields([["state", state], ["in use", shares.join(", ") || "not measured"],
            ["Redis (MB)", `${num(m.redis_used_mb)} used` +
              (m.redis_max_mb ? ` of ${num(m.redis_max_mb)}` : "")],
            ["node (MB)", `${num(m.node_available_mb)} available of ${num(m.node_total_mb)}`],
            ["invocation records", `${num(r.in_redis)} in Redis, ${num(r.redis_mb)} of ` +
              `${num(r.redis_max_mb)} MB; ${archive}`]]));
}

// a function's figures from its stats: [title, (stats) => cell]
const STAT_COLUMNS = [
  ...STATES.map((state) => [state, (st) => num(st.containers[state])]),
  ["queued", (st) => num(st.queued)],
  ["invocations", (st) => num(st.invocations)],
  ["warm", (st) => num(st.warm)],
  ["cold", (st) => num(st.cold)],
  ["errors", (st) => num(st.errors + st.timeouts)],
  ["run p50", (st) => seconds(st.run_p50_s)],
  ["run p99", (st) => seconds(st.run_p99_s)],
];

export async function functionsPage(body, _, { every }) {
  const node = h("div");
  const list = h("div");
  body.append(h("h1", {}, "Functions and containers"), node, h("h2", {}, "Functions"),
              h("p", { class: "muted" }, "Invocation figures: the most recent 200 of each."),
              list);
  every(2000, async () => {
    const [specs, cluster, health] = await Promise.all([
      get("/v1/functions"), get("/v1/cluster"), get("/healthz")]);
    const stats = Object.fromEntries(await Promise.all(
      specs.map(async (s) => [s.name, await get(`/v1/functions/${s.name}/stats`)])));
    node.replaceChildren(capacity(cluster), memory(health));
    const columns = [
      ["function", (s) => link(`#/functions/${s.name}`, s.name)],
      ["handler", (s) => s.handler],
      ["cpu / MB / GPU", (s) => `${s.cpu} / ${s.memory_mb} / ${s.gpu}`],
      ["placement", (s) => s.placement],
      ...STAT_COLUMNS.map(([title, cell]) => [title, (s) => cell(stats[s.name])]),
    ];
    list.replaceChildren(table(columns, specs, { id: "functions-table",
                                                 empty: "No functions registered." }));
  });
}

// a function's published versions and the aliases that route to them (a canary's weight)
function versionTables(published, aliases) {
  const canary = (a) => Object.entries(a.routing.additional_version_weights)
    .map(([v, w]) => `version ${v} at ${num(w * 100, 1)} %`).join(", ") || "–";
  return h("div", {}, table([
    ["version", (v) => String(v.version)],
    ["published", (v) => when(v.created_at)],
    ["code", (v) => (v.code_sha256 || "–").slice(0, 12)],
    ["config (env)", (v) => Object.entries(v.manifest.env || {}).map(([k, x]) => `${k}=${x}`)
      .join(" ") || "–"],
    ["description", (v) => v.description || "–"],
  ], published, { id: "versions-table", empty: "No published versions." }), table([
    ["alias", (a) => a.name],
    ["version", (a) => String(a.version)],
    ["canary", canary],
    ["description", (a) => a.description || "–"],
  ], aliases, { id: "aliases-table", empty: "No aliases." }));
}

export async function functionPage(body, name, { every }) {
  const spec = await get(`/v1/functions/${name}`);
  const summary = h("div");
  const containers = h("div");
  const recent = h("div");
  const letters = h("div");
  const lettersPath = `/v1/functions/${name}/dead-letters`;
  const redriven = h("p", { id: "redrive-result", class: "muted" });
  const redrive = h("button", { type: "button", id: "redrive-all", onclick: async (e) => {
    e.target.disabled = true;
    try {
      const out = await post(`${lettersPath}/redrive`, { json: { all: true } });
      redriven.textContent = `redrove ${out.redriven.length} as new invocations`;
    } catch (err) {
      redriven.textContent = String(err.message || err);
    }
  } }, "Redrive all");
  const logs = h("div", { id: "function-logs" });
  const versions = h("div");
  body.append(h("h1", {}, `Function ${name}`), summary,
              h("h2", {}, "Versions and aliases"), versions,
              h("h2", {}, "Containers"), containers,
              h("h2", {}, "Recent invocations"), recent, h("h2", {}, "Logs"),
              h("p", { class: "muted" }, "What its 10 most recent invocations wrote, newest " +
                "first, and what its containers wrote outside any invocation."), logs,
              h("h2", {}, "Dead letters"),
              h("p", { class: "muted" }, "Asynchronous invocations that failed after their " +
                `retries (maximum_retry_attempts ${spec.maximum_retry_attempts}).`),
              h("div", { class: "actions" }, redrive, redriven), letters,
              h("h2", {}, "Manifest"), h("div", { id: "manifest" }, pre(spec)));
  every(2000, async () => {
    const [stats, cluster, invocations, dead, written, published, aliases] = await Promise.all([
      get(`/v1/functions/${name}/stats`), get("/v1/cluster"),
      get("/v1/invocations", { query: { function: name, limit: 20 } }), get(lettersPath),
      get(`/v1/functions/${name}/logs`, { query: { limit: 10 } }),
      get(`/v1/functions/${name}/versions`), get(`/v1/functions/${name}/aliases`)]);
    versions.replaceChildren(versionTables(published, aliases));
    logs.replaceChildren(...written.invocations.map((i) => h("div", { class: "log" },
      h("p", {}, link(`#/invocations/${i.id}`, i.id.slice(0, 12)), " ", badge(i.status), " ",
        when(i.requested_at), i.job ? [" job ", link(`#/jobs/${i.job}`, i.job)] : null),
      logText(i.logs))),
    ...written.containers.map((c) => h("div", { class: "log" },
      h("p", {}, `container ${c.container}, outside invocations, ${when(c.at)}`), pre(c.logs))));
    if (!logs.childElementCount) logs.append(h("p", { class: "muted" }, "No logs yet."));
    summary.replaceChildren(fields([
      ...STAT_COLUMNS.map(([title, cell]) => [title, cell(stats)]),
      ["latency p50 (queue + run)", seconds(stats.latency_p50_s)],
      ["latency p99", seconds(stats.latency_p99_s)],
      ["billed", `${num(stats.billed_ms)} ms over the last ${num(stats.invocations)}`],
    ]));
    const pool = cluster.functions[name] || { containers: [] };
    containers.replaceChildren(table([
      ["container", (c) => c.id],
      ["state", (c) => c.state],
      ["in flight", (c) => num(c.inflight)],
      ["served", (c) => num(c.served)],
      ["age", (c) => seconds(c.age_s)],
      ["idle", (c) => seconds(c.idle_s)],
      ["memory (MB)", (c) => num(c.memory_mb, 0)],
      ["CPU time", (c) => seconds(c.cpu_s)],
      ["where", (c) => c.endpoint || "–"],
    ], pool.containers, { id: "containers-table", empty: "No containers now." }));
    recent.replaceChildren(table(invocationColumns, invocations,
                                 { id: "function-invocations", empty: "None yet." }));
    redrive.disabled = !dead.length;
    letters.replaceChildren(table([
      ["invocation", (d) => link(`#/invocations/${d.id}`, d.id.slice(0, 12))],
      ["failed", (d) => when(d.failed_at)],
      ["condition", (d) => d.condition],
      ["attempts", (d) => num(d.attempts)],
      ["error", (d) => `${d.error.type || ""}: ${d.error.message || ""}`],
      ["args", (d) => JSON.stringify(d.args)],
    ], dead, { id: "dead-letters", empty: "None." }));
  });
}
