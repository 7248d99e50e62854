// Jobs: the list, and one job's page with its live charts (the job's event stream, read
// with the token) and its actions.

import { download, followEvents, get, objectUrl, post, Unauthorized } from "./api.js";
import { JobCharts } from "./charts.js";
import { append, badge, fields, h, link, num, pre, seconds, table, usd, when } from "./dom.js";

const ACTIVE = ["pending", "running", "paused"];
const RESUMABLE = ["cancelled", "failed", "interrupted"];

function meanReturn(job) {
  const last = job.last_row && job.last_row.recent_mean_return;
  if (typeof last === "number") return last;
  const r = job.recent_returns || [];
  return r.length ? r.reduce((a, b) => a + b, 0) / r.length : null;
}

const describeController = (spec) => spec.controller.name +
  (spec.controller.name === "fixed" ? ` (${spec.controller.actors})` : "");

export async function jobsPage(body, _, { every }) {
  const holder = h("div");
  body.append(h("h1", {}, "Jobs"), holder);
  let shown = "";
  every(2000, async () => {
    const jobs = (await get("/v1/jobs")).sort((a, b) => b.created_at - a.created_at);
    const key = JSON.stringify(jobs.map((j) => [j.id, j.status, j.round, j.cost_usd]));
    if (key === shown) return; // keep the rows (and what the user points at) when nothing moved
    shown = key;
    holder.replaceChildren(table([
      ["job", (j) => link(`#/jobs/${j.id}`, j.spec.name || j.id)],
      ["status", (j) => badge(j.status)],
      ["algorithm", (j) => `${j.spec.algorithm} (${j.spec.execution})`],
      ["env", (j) => j.spec.env_id],
      ["controller", (j) => describeController(j.spec)],
      ["round", (j) => num(j.round)],
      ["env steps", (j) => num(j.env_steps)],
      ["return", (j) => num(meanReturn(j))],
      ["cost", (j) => usd(j.cost_usd)],
      ["created", (j) => when(j.created_at)],
    ], jobs, { id: "jobs-table", empty: "No jobs yet: submit one with `faasrl run SPEC.yaml` " +
                                        "or POST /v1/jobs." }));
  });
}

// Where the spec's serve rule last published the policy and where its alias points (a link
// to the function's page, whose versions and aliases roll it back; moved by hand, the rule
// leaves it), or why a try failed; none without a serve rule.
function serving(s) {
  if (!s) return undefined;
  const model = `model version ${s.model_version}`;
  const at = s.function_version === null ? "nothing published yet"
    : s.alias_version === s.function_version ? `version ${s.function_version} (${model})`
    : `version ${s.alias_version}, held by hand (newest: ${s.function_version}, ${model})`;
  return h("span", { id: "job-serving" },
           link(`#/functions/${s.function}`, `${s.function}:${s.alias}`),
           ` → ${at}`,
           s.error ? h("span", { class: "error" }, ` · last try failed: ${s.error}`) : null);
}

function summary(job) {
  const spec = job.spec;
  const ev = job.evaluation;
  return fields([
    ["algorithm", `${spec.algorithm} (${spec.execution})`],
    ["env", spec.env_id],
    ["controller", describeController(spec)],
    ["round", spec.stop.max_rounds ? `${num(job.round)} of ${num(spec.stop.max_rounds)}`
                                   : num(job.round)],
    ["env steps", num(job.env_steps)],
    ["return (window mean)", num(meanReturn(job))],
    ["target", spec.stop.target_reward ?? "–"],
    ["wall time", seconds(job.wall_s)],
    ["modeled-parallel wall time", job.parallel_wall_s ? seconds(job.parallel_wall_s) : "–"],
    ["cost, serverless", usd(job.cost_usd)],
    ["cost, serverful", usd(job.serverful_cost_usd)],
    ["cost, modeled parallel", job.parallel_cost_usd ? usd(job.parallel_cost_usd) : "–"],
    ["policy version", job.version ?? "–"],
    ["held-out evaluation", ev ? `${num(ev.mean)} ± ${num(ev.std)} over ${ev.episodes}` : "–"],
    ["serving", serving(job.serving)],
    ["stop reason", job.stop_reason || "–"],
    ["held by a quota", job.held || undefined],
    ["error", job.error ? h("span", { class: "error" }, job.error) : undefined],
  ]);
}

// How the job shares the node with other jobs: its priority, its part of what the jobs used
// lately against its fair part (the latest row's), its actor-seconds and its waits for
// capacity per phase (every row's, summed).
function sharing(job, rows) {
  const share = job.last_row && job.last_row.share;
  const pct = (x) => `${(100 * x).toFixed(0)} %`;
  const waits = {};
  for (const row of rows) {
    for (const [phase, s] of Object.entries(row.queue_s || {})) {
      waits[phase] = (waits[phase] || 0) + s;
    }
  }
  const phases = Object.entries(waits).map(([phase, s]) => `${phase} ${seconds(s)}`);
  return h("div", { id: "job-sharing" }, fields([
    ["priority", num(job.spec.priority)],
    ["share of the node", share ? `${pct(share.got)} (fair: ${pct(share.fair)})` : "–"],
    ["actor-seconds", num(rows.reduce((sum, row) => sum + (row.actor_s || 0), 0))],
    ["waited for capacity", phases.length ? phases.join(" · ") : "–"],
  ]));
}

// The job's videos in HTML5 players (its final evaluation's and those played on demand), or
// why it has none. Each mp4 is fetched with the token into a blob: URL, revoked with the page.
function videoSection(id, signal) {
  const box = h("div", { id: "job-videos" });
  const urls = new Map(); // video index → {url: its blob: URL, type}
  signal.addEventListener("abort", () => urls.forEach(({ url }) => URL.revokeObjectURL(url)));
  let shown = "";
  const draw = async (job) => {
    const videos = await get(`/v1/jobs/${id}/videos`, { signal }).catch(() => null);
    if (!videos) return;
    const why = job.video && job.video.message;
    const key = JSON.stringify([videos.map((v) => v.n), why]);
    if (key === shown) return;
    shown = key;
    for (const v of videos) {
      if (!urls.has(v.n)) urls.set(v.n, await objectUrl(`/v1/jobs/${id}/videos/${v.n}`, { signal }));
    }
    box.replaceChildren();
    append(box,
      videos.map((v) => h("figure", { class: "video" },
        h("video", { id: `job-video-${v.n}`, controls: true, preload: "metadata",
                     width: v.width, height: v.height, src: urls.get(v.n).url,
                     dataset: { source: `/v1/jobs/${id}/videos/${v.n}`,
                                type: urls.get(v.n).type } }),
        h("figcaption", {}, `video ${v.n}: version ${v.version} (${v.source}), ` +
                            `${num(v.frames)} frames at ${v.fps} fps, return ` +
                            `${num(v.episode_return)}`))),
      why ? h("p", { class: "muted", id: "job-video-why" }, `No video: ${why}`) : null,
      videos.length || why ? null
        : h("p", { class: "muted" }, "No videos: set evaluation.video in the job spec, or " +
                                     "record one with Play."));
  };
  return { box, draw };
}

export async function jobPage(body, id, { signal, showLogin, reload }) {
  let job = await get(`/v1/jobs/${id}`, { signal });
  const rows = [];
  const state = h("span", { id: "stream-state", class: "muted" }, "connecting");
  const head = h("div");
  const status = h("p", { id: "action-result", class: "muted" });
  const chartBox = h("div", { class: "charts" });
  const lastRow = h("div");
  const shareBox = h("div");
  const act = (label, idName, run) => h("button", { type: "button", id: idName,
    onclick: async (e) => {
      e.target.disabled = true;
      try {
        status.textContent = await run();
      } catch (err) {
        if (err instanceof Unauthorized) return showLogin("The token was refused.");
        status.textContent = String(err.message || err);
      }
      drawHead();
    } }, label);
  const buttons = {
    cancel: act("Cancel", "job-cancel", async () => {
      job = await post(`/v1/jobs/${id}/cancel`);
      return `cancelled at round ${job.round}`;
    }),
    resume: act("Resume", "job-resume", async () => {
      job = await post(`/v1/jobs/${id}/resume`);
      setTimeout(reload, 0); // follow the resumed run's rounds from a fresh stream
      return "resumed";
    }),
    model: act("Download model", "job-model",
               async () => `saved ${await download(`/v1/jobs/${id}/model`, `${id}.safetensors`)}`),
    csv: act("Metrics CSV", "job-csv", async () =>
      `saved ${await download(`/v1/jobs/${id}/metrics?format=csv`, `${id}.csv`)}`),
    play: act("Play latest version", "job-play", async () => {
      status.textContent = "recording an episode…";
      const v = await post(`/v1/jobs/${id}/play`, { json: {} });
      await videos.draw(job);
      return `recorded video ${v.n} (version ${v.version})`;
    }),
  };
  const videos = videoSection(id, signal);
  const drawHead = () => {
    head.replaceChildren(h("h1", {}, `Job ${job.spec.name || job.id} `, badge(job.status)),
                         summary(job));
    buttons.cancel.disabled = !ACTIVE.includes(job.status);
    buttons.resume.disabled = !RESUMABLE.includes(job.status);
    buttons.model.disabled = job.version === null || job.version === undefined;
    buttons.csv.disabled = false;
    buttons.play.disabled = buttons.model.disabled;
    videos.draw(job);
  };
  drawHead();
  body.append(head, h("div", { class: "actions" }, Object.values(buttons), state), status,
              h("h2", {}, "Videos"), videos.box, h("h2", {}, "Sharing the node"), shareBox, chartBox, h("h2", {}, "Latest round"),
              lastRow);
  // The metrics columns the gateway names (faasrl/round_row.py): the charts draw by them.
  const columns = await get("/v1/jobs/columns", { signal });
  const charts = new JobCharts(chartBox, { target: job.spec.stop.target_reward, columns });
  signal.addEventListener("abort", () => charts.close());

  // Rows come in bursts (all past rounds at once): draw at most a few times a second, and
  // re-read the record (round, cost, status) at most once a second.
  let drawPending = false;
  let lastRecordRead = 0;
  const redraw = () => {
    if (drawPending) return;
    drawPending = true;
    setTimeout(async () => {
      drawPending = false;
      if (signal.aborted) return;
      charts.update(rows);
      const last = rows[rows.length - 1];
      lastRow.replaceChildren(last ? pre(last) : h("p", { class: "muted" }, "no round yet"));
      shareBox.replaceChildren(sharing(job, rows));
      if (Date.now() - lastRecordRead > 1000) {
        lastRecordRead = Date.now();
        job = await get(`/v1/jobs/${id}`, { signal }).catch(() => job);
        drawHead();
      }
    }, 250);
  };
  redraw();
  followEvents(`/v1/jobs/${id}/events`, {
    signal,
    onState: (s) => { state.textContent = s; },
    onEvent: (name, data) => {
      if (name === "round") {
        rows.push(data);
        redraw();
      } else if (name === "end") {
        job = data;
        state.textContent = "ended";
        drawHead();
        redraw();
      }
    },
  }).catch((err) => {
    if (err instanceof Unauthorized) showLogin("The token was refused.");
  });
}
