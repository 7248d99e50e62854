// Functions and containers: every function with its containers by state, warm and cold
// invocations, errors and run times; the node's capacity; one function's manifest, containers
// and recent invocations.

import { get } from "./api.js";
import { fields, h, link, num, pre, seconds, table } from "./dom.js";
import { invocationColumns } from "./invocations.js";

const STATES = ["starting", "idle", "busy", "stopping"];

function capacity(cluster) {
  const { capacity: total, reserved, free } = cluster;
  const used = (k) => `${num(reserved[k])} used, ${num(free[k])} free of ${num(total[k])}`;
  return h("div", { id: "capacity" }, h("h2", {}, `Node capacity (${cluster.backend} backend)`),
    fields([["CPU (cores)", used("cpu")], ["memory (MB)", used("memory_mb")],
            ["GPUs", used("gpus")]]));
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
    const [specs, cluster] = await Promise.all([get("/v1/functions"), get("/v1/cluster")]);
    const stats = Object.fromEntries(await Promise.all(
      specs.map(async (s) => [s.name, await get(`/v1/functions/${s.name}/stats`)])));
    node.replaceChildren(capacity(cluster));
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

export async function functionPage(body, name, { every }) {
  const spec = await get(`/v1/functions/${name}`);
  const summary = h("div");
  const containers = h("div");
  const recent = h("div");
  body.append(h("h1", {}, `Function ${name}`), summary, h("h2", {}, "Containers"), containers,
              h("h2", {}, "Recent invocations"), recent, h("h2", {}, "Manifest"),
              h("div", { id: "manifest" }, pre(spec)));
  every(2000, async () => {
    const [stats, cluster, invocations] = await Promise.all([
      get(`/v1/functions/${name}/stats`), get("/v1/cluster"),
      get("/v1/invocations", { query: { function: name, limit: 20 } })]);
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
  });
}
