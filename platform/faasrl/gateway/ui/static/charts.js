// The job page's charts, drawn by plotly.js (served from the gateway's installed plotly
// package) from the job's metrics rows. Column names are the ones the gateway serves
// (GET /v1/jobs/columns, from faasrl/round_row.py): a series naming a column the gateway does
// not know is left out and listed in its chart's data-unknown (a renamed column shows there,
// not as a silently empty chart), and a point's hover says what its column means. A series
// whose column no row has (another workflow's, or a model's figures from before it existed)
// is left out too, so each job shows what it has.

const col = (name) => Object.assign((row) => row[name], { column: name });

// Where the numbers of a row's controller column (the controller's explain()) are drawn: the
// actors it wanted (Nitro's before a budget cap, MinionsRL's action) beside the actors; Nitro's
// k, an update counter (the row's round again), not at all, since on the decision axis it
// flattened what the decision was made on; any other number (Nitro's score and ratio,
// KungFu's noise scale) on the decision axis under its own name.
const CONTROLLER_AXIS = new Map([["wanted", "y"], ["action", "y"], ["k", null]]);

const PANELS = [
  {
    id: "chart-return-steps", title: "Return vs env steps", xTitle: "env steps",
    yTitle: "episode return", target: true,
    series: [
      { x: col("total_env_steps"), y: col("mean_return"), name: "round mean", mode: "markers" },
      { x: col("total_env_steps"), y: col("recent_mean_return"), name: "mean of the window" },
    ],
  },
  {
    id: "chart-return-time", title: "Return vs wall time", xTitle: "seconds",
    yTitle: "episode return", target: true,
    series: [
      { x: col("wall_s"), y: col("mean_return"), name: "round mean", mode: "markers" },
      { x: col("wall_s"), y: col("recent_mean_return"), name: "measured wall time" },
      { x: col("parallel_wall_s"), y: col("recent_mean_return"), name: "modeled parallel",
        dash: "dot" },
    ],
  },
  {
    id: "chart-actors", title: "Actors per round and the controller's decision",
    xTitle: "round", xCounts: true, yTitle: "actors", y2Title: "decision details",
    yCounts: true,
    series: [
      { x: col("round"), y: col("actors"), name: "actors", shape: "hv" },
      { x: col("round"), y: col("prewarm_forecast"), name: "pre-warm forecast", shape: "hv",
        dash: "dot" },
      // Stellaris' staleness and its aggregation threshold (async rounds)
      { x: col("round"), y: col("staleness_mean"), name: "staleness (mean)", axis: "y2" },
      { x: col("round"), y: col("staleness_max"), name: "staleness (max)", axis: "y2" },
      { x: col("round"), y: col("threshold"), name: "threshold", axis: "y2", dash: "dash" },
    ],
    // what the controller decided on, each number under its own name (CONTROLLER_AXIS)
    dynamic: (rows) => numericKeys(rows, "controller")
      .filter((key) => CONTROLLER_AXIS.get(key) !== null)
      .map((key) => ({
        x: col("round"), y: Object.assign((row) => (row.controller || {})[key],
                                          { column: "controller" }),
        name: `controller: ${key}`,
        axis: CONTROLLER_AXIS.get(key) || "y2", mode: "lines+markers",
        dash: CONTROLLER_AXIS.get(key) === "y" ? "dashdot" : undefined,
      })),
  },
  {
    id: "chart-phases", title: "Phase times per round", xTitle: "round", xCounts: true,
    yTitle: "seconds",
    y2Title: "cold starts", y2Counts: true,
    series: [
      { x: col("round"), y: col("round_s"), name: "round" },
      { x: col("round"), y: col("parallel_round_s"), name: "round, modeled parallel",
        dash: "dot" },
      { x: col("round"), y: col("actor_phase_s"), name: "actors" },
      { x: col("round"), y: col("learner_phase_s"), name: "learner phase" },
      { x: col("round"), y: col("learner_s"), name: "learner runs" },
      { x: col("round"), y: col("parameter_s"), name: "parameter function" },
      { x: col("round"), y: col("transfer_s"), name: "transfer" },
      { x: col("round"), y: col("queue_s_max"), name: "longest queue" },
      { x: col("round"), y: col("cold_starts"), name: "cold starts", axis: "y2", type: "bar" },
    ],
  },
  {
    id: "chart-cost", title: "Cumulative cost", xTitle: "wall time (s)", yTitle: "USD",
    series: [
      { x: col("wall_s"), y: col("cost_total"), name: "serverless" },
      { x: col("wall_s"), y: col("serverful_cost_total"), name: "serverful" },
      { x: col("wall_s"), y: col("parallel_cost_total"), name: "serverless, modeled parallel",
        dash: "dot" },
    ],
  },
];

function numericKeys(rows, column) {
  const keys = new Set();
  for (const row of rows) {
    for (const [k, v] of Object.entries(row[column] || {})) {
      if (typeof v === "number") keys.add(k);
    }
  }
  return [...keys].sort();
}

const columnsOf = (series) => [series.x.column, series.y.column].filter(Boolean);

function trace(series, rows, known) {
  const points = rows.map((row) => [series.x(row), series.y(row)])
    .filter(([x, y]) => typeof x === "number" && typeof y === "number");
  if (!points.length) return null;
  return {
    x: points.map((p) => p[0]), y: points.map((p) => p[1]), name: series.name,
    type: series.type || "scatter", mode: series.mode || "lines",
    yaxis: series.axis || "y", opacity: series.type === "bar" ? 0.35 : 1,
    line: { shape: series.shape || "linear", dash: series.dash || "solid", width: 2 },
    marker: { size: 5 },
    hovertemplate: `%{y}<extra>${columnsOf(series).map((c) => known.get(c)?.description)
      .filter(Boolean).join("; ")}</extra>`,
  };
}

// An axis of counts (rounds, actors, cold starts): from 0, whole-number ticks only.
function countAxis(values) {
  return { rangemode: "tozero", tick0: 0,
           dtick: Math.max(1, Math.ceil(Math.max(1, ...values) / 6)) };
}

const yValues = (data, axis) => data.filter((t) => t.yaxis === axis).flatMap((t) => t.y);

function layout(panel, data, target) {
  const out = {
    title: { text: panel.title, font: { size: 14 }, x: 0.01, xanchor: "left" }, height: 300,
    margin: { l: 55, r: panel.y2Title ? 55 : 15, t: 35, b: 70 },
    xaxis: { title: { text: panel.xTitle }, zeroline: false,
             ...(panel.xCounts ? countAxis(data.flatMap((t) => t.x)) : {}) },
    yaxis: { title: { text: panel.yTitle }, zeroline: false,
             ...(panel.yCounts ? countAxis(yValues(data, "y")) : {}) },
    legend: { orientation: "h", y: -0.3, font: { size: 10 } },
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fbfbfd",
  };
  if (panel.y2Title) {
    out.yaxis2 = { title: { text: panel.y2Title }, overlaying: "y", side: "right",
                   showgrid: false, zeroline: false,
                   ...(panel.y2Counts ? countAxis(yValues(data, "y2")) : {}) };
  }
  if (panel.target && typeof target === "number") {
    out.shapes = [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: target, y1: target,
                    line: { dash: "dash", color: "#888", width: 1 } }];
  }
  return out;
}

// The charts of one job: call update(rows) with every row so far (it redraws what changed).
export class JobCharts {
  constructor(container, { target, columns }) {
    this.target = target;
    this.known = new Map(columns.map((c) => [c.name, c]));
    this.available = typeof window.Plotly !== "undefined";
    this.divs = new Map();
    if (!this.available) {
      container.append(Object.assign(document.createElement("p"), {
        className: "error",
        textContent: "Charts unavailable: the gateway could not serve plotly.min.js " +
                     "(is plotly installed?)",
      }));
      return;
    }
    for (const panel of PANELS) {
      const div = document.createElement("div");
      div.id = panel.id;
      div.className = "chart";
      div.dataset.points = "0";
      container.append(div);
      this.divs.set(panel.id, div);
    }
  }

  update(rows) {
    if (!this.available) return;
    for (const panel of PANELS) {
      const all = [...panel.series, ...(panel.dynamic ? panel.dynamic(rows) : [])];
      const unknown = all.flatMap(columnsOf).filter((c) => !this.known.has(c));
      const series = all.filter((s) => columnsOf(s).every((c) => this.known.has(c)));
      const data = series.map((s) => trace(s, rows, this.known)).filter(Boolean);
      const div = this.divs.get(panel.id);
      div.dataset.unknown = [...new Set(unknown)].join("|");
      window.Plotly.react(div, data, layout(panel, data, this.target),
                          { displaylogo: false, responsive: true });
      // what a test (or a curious user) can read: the points of the fullest series
      div.dataset.points = String(Math.max(0, ...data.map((t) => t.x.length)));
      div.dataset.series = data.map((t) => t.name).join("|");
    }
  }

  close() {
    if (!this.available) return;
    for (const div of this.divs.values()) window.Plotly.purge(div);
  }
}
