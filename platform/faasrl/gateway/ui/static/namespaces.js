// Namespaces: each one's use now against its quota and its spend over the last 24 h (the
// gateway's token sees every namespace, a namespace's key its own); one namespace's page adds
// its keys, for whoever may manage them (never a key itself: the API never lists one).

import { ApiError, get } from "./api.js";
import { fields, h, link, num, table, usd, when } from "./dom.js";

// [quota field, title, format]: the quota's limits in its own order (namespaces.py: Quota)
const LIMITS = [
  ["cores", "cores", num],
  ["memory_mb", "memory (MB)", num],
  ["gpus", "GPUs", num],
  ["containers", "containers", num],
  ["jobs", "jobs running", num],
  ["spend_usd_per_day", "spend (24 h)", usd],
];

// "used of limit" (or "used, no limit"), marked when the use has reached the limit
function against(ns, [key, , format]) {
  const used = ns.usage[key];
  const limit = ns.quota[key];
  if (limit === null || limit === undefined) return `${format(used)}, no limit`;
  const text = `${format(used)} of ${format(limit)}`;
  return used >= limit ? h("span", { class: "at-limit" }, text) : text;
}

function caller(me) {
  return me.root
    ? "You use the gateway's token (root): every namespace is yours to manage."
    : `You use key ${me.key_id} (${me.role}) of namespace ${me.namespace}.`;
}

export async function namespacesPage(body, _, { every }) {
  const me = await get("/v1/whoami");
  const holder = h("div");
  body.append(h("h1", {}, me.root ? "Namespaces" : `Namespace ${me.namespace}`),
              h("p", { id: "whoami", class: "muted" }, caller(me)), holder);
  every(5000, async () => {
    const namespaces = await get("/v1/namespaces");
    holder.replaceChildren(table([
      ["namespace", (ns) => link(`#/namespaces/${ns.name}`, ns.name)],
      ...LIMITS.map((limit) => [limit[1], (ns) => against(ns, limit)]),
      ["created", (ns) => when(ns.created_at)],
    ], namespaces, { id: "namespaces-table", empty: "No namespaces." }));
  });
}

export async function namespacePage(body, name, { every }) {
  const summary = h("div");
  const keys = h("div", { id: "keys" });
  body.append(h("h1", {}, `Namespace ${name}`), summary, h("h2", {}, "API keys"), keys);
  every(5000, async () => {
    const ns = await get(`/v1/namespaces/${name}`);
    summary.replaceChildren(fields([
      ...LIMITS.map((limit) => [limit[1], against(ns, limit)]),
      ["created", when(ns.created_at)],
    ]));
    let listed;
    try {
      listed = await get(`/v1/namespaces/${name}/keys`);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 403)) throw err;
      keys.replaceChildren(h("p", { class: "muted" },
                             "Only the namespace's admin keys and the gateway's token see its keys."));
      return;
    }
    keys.replaceChildren(table([
      ["id", (k) => k.id],
      ["role", (k) => k.role],
      ["name", (k) => k.name || "–"],
      ["created", (k) => when(k.created_at)],
      ["last used", (k) => when(k.last_used_at)],
      ["revoked", (k) => (k.revoked_at ? when(k.revoked_at) : "–")],
    ], listed, { id: "keys-table",
                 empty: `No keys yet: faasrl keys create --namespace ${name}` }));
  });
}
