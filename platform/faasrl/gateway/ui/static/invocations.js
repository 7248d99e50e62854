// Invocations: the recent ones, filtered by function and status (kept in the page's address,
// which holds no secret), and one invocation's record.

import { get, getText } from "./api.js";
import { append, badge, fields, h, link, num, pre, seconds, table, when } from "./dom.js";

export const invocationColumns = [
  ["invocation", (r) => link(`#/invocations/${r.id}`, r.id.slice(0, 12))],
  ["function", (r) => r.function],
  ["status", (r) => badge(r.status)],
  ["start", (r) => (r.cold ? "cold" : "warm")],
  ["attempts", (r) => num(r.attempts)],
  ["queue", (r) => seconds(r.queue_s)],
  ["init", (r) => (r.cold ? seconds(r.init_s) : "–")],
  ["run", (r) => seconds(r.run_s)],
  ["billed", (r) => `${num(r.billed_ms)} ms`],
  ["requested", (r) => when(r.requested_at)],
];

export async function invocationsPage(body, _, { every, query }) {
  const functions = await get("/v1/functions");
  const choice = (id, label, options, value) => h("label", {}, label,
    h("select", { id, onchange: apply },
      options.map(([v, text]) => h("option", { value: v, selected: v === value }, text))));
  const limit = h("input", { id: "filter-limit", type: "number", min: 1, max: 1000,
                             value: query.get("limit") || "50", onchange: apply });
  const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); apply(); } },
    choice("filter-function", "function ", [["", "all"], ...functions.map((f) => [f.name,
                                                                                  f.name])],
           query.get("function") || ""),
    choice("filter-status", "status ", [["", "any"], ["success", "success"],
                                        ["error", "error"], ["timeout", "timeout"]],
           query.get("status") || ""),
    h("label", {}, "show ", limit));
  function apply() {
    const q = new URLSearchParams();
    for (const [key, id] of [["function", "filter-function"], ["status", "filter-status"],
                             ["limit", "filter-limit"]]) {
      const value = document.getElementById(id).value;
      if (value) q.set(key, value);
    }
    location.hash = `#/invocations?${q}`;
  }
  const holder = h("div");
  body.append(h("h1", {}, "Invocations"), form, holder);
  every(3000, async () => {
    const records = await get("/v1/invocations", { query: {
      function: query.get("function"), status: query.get("status"),
      limit: query.get("limit") || 50 } });
    holder.replaceChildren(table(invocationColumns, records,
                                 { id: "invocations-table", empty: "No invocations match." }));
  });
}

// What an invocation printed, logged and warned (the last 64 KB), or a line saying it wrote none.
export function logText(text) {
  return text ? pre(text) : h("p", { class: "muted" }, "It wrote nothing.");
}

export async function invocationPage(body, id) {
  const [r, logs] = await Promise.all([get(`/v1/invocations/${id}`),
                                       getText(`/v1/invocations/${id}/logs`)]);
  const err = r.error || null;
  append(body,
    h("h1", {}, `Invocation ${r.id} `, badge(r.status)),
    fields([
      ["function", link(`#/functions/${r.function}`, r.function)],
      ["start", r.cold ? "cold (waited for a container start)" : "warm"],
      ["attempts", num(r.attempts)],
      ["queue (request to container)", seconds(r.queue_s)],
      ["init (container start + load)", r.cold ? seconds(r.init_s) : "–"],
      ["run (the handler)", seconds(r.run_s)],
      ["billed", `${num(r.billed_ms)} ms at ${num(r.memory_mb)} MB`],
      ["backend", r.backend],
      ["container", r.container || "–"],
      ["job", r.job ? link(`#/jobs/${r.job}`, r.job) : "–"],
      ["requested", when(r.requested_at)],
      ["finished", when(r.finished_at)],
    ]),
    err ? h("div", { id: "invocation-error" }, h("h2", {}, "Error"),
            h("p", { class: "error" }, `${err.type || "Error"}: ${err.message || ""}`),
            err.traceback ? pre(err.traceback) : null) : null,
    r.status === "success"
      ? [h("h2", {}, "Result"), h("div", { id: "invocation-result" }, pre(r.result ?? null))]
      : null,
    h("h2", {}, "Logs"), h("div", { id: "invocation-logs" }, logText(logs)),
  );
}
