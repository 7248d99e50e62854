// The dashboard's shell: log in, the hash routes (#/jobs, #/jobs/ID, #/functions,
// #/functions/NAME, #/invocations?function=&status=, #/invocations/ID, #/namespaces,
// #/namespaces/NAME), and the page context
// each page gets (an abort signal that fires when the user leaves it, and a poller).

import { get, token, Unauthorized } from "./api.js";
import { h } from "./dom.js";
import { functionPage, functionsPage } from "./functions.js";
import { invocationPage, invocationsPage } from "./invocations.js";
import { jobPage, jobsPage } from "./jobs.js";
import { namespacePage, namespacesPage } from "./namespaces.js";

const ROUTES = [
  [/^jobs$/, jobsPage],
  [/^jobs\/([A-Za-z0-9_-]+)$/, jobPage],
  [/^functions$/, functionsPage],
  [/^functions\/([A-Za-z0-9_-]+)$/, functionPage],
  [/^invocations$/, invocationsPage],
  [/^invocations\/([0-9a-f]{32})$/, invocationPage],
  [/^namespaces$/, namespacesPage],
  [/^namespaces\/([a-z0-9-]+)$/, namespacePage],
];

const main = document.getElementById("main");
const login = document.getElementById("login");
let current = null; // the shown page's AbortController

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "") || "jobs";
  const [path, query = ""] = raw.split("?");
  return { path, query: new URLSearchParams(query) };
}

function showLogin(message = "") {
  current?.abort();
  main.replaceChildren();
  login.hidden = false;
  document.getElementById("logout").hidden = true;
  document.getElementById("login-error").textContent = message;
  document.getElementById("token").focus();
}

// Runs `work` now and every `ms` until the page is left; the first failure that is not a
// missing token shows as a banner on the page (and the next success clears it).
function poller(signal, banner) {
  return (ms, work) => {
    const tick = async () => {
      if (signal.aborted) return;
      try {
        await work();
        banner.replaceChildren();
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof Unauthorized) return showLogin("The token was refused.");
        banner.replaceChildren(h("p", { class: "error" }, String(err.message || err)));
      }
      if (!signal.aborted) setTimeout(tick, ms);
    };
    tick();
  };
}

async function route() {
  current?.abort();
  current = new AbortController();
  const { signal } = current;
  const { path, query } = parseHash();
  const section = path.split("/")[0];
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.section === section);
  }
  const match = ROUTES.map(([re, page]) => [path.match(re), page]).find(([m]) => m);
  const banner = h("div", { class: "banner" });
  const body = h("div", { class: "page" });
  main.replaceChildren(banner, body);
  if (!match) {
    body.append(h("p", { class: "error" }, `No page at #/${path}`));
    return;
  }
  const [m, page] = match;
  const ctx = { signal, query, every: poller(signal, banner), showLogin, reload: route };
  try {
    await page(body, decodeURIComponent(m[1] || ""), ctx);
  } catch (err) {
    if (signal.aborted) return;
    if (err instanceof Unauthorized) return showLogin("The token was refused.");
    banner.replaceChildren(h("p", { class: "error" }, String(err.message || err)));
  }
}

async function start() {
  try {
    await get("/v1/cluster"); // answers 401 when the gateway wants a token we lack
  } catch (err) {
    if (err instanceof Unauthorized) {
      return showLogin(token.get() ? "The token was refused." : "");
    }
  }
  login.hidden = true;
  document.getElementById("logout").hidden = !token.get();
  await route();
}

document.getElementById("login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("token");
  token.set(input.value.trim());
  input.value = "";
  start();
});

document.getElementById("logout").addEventListener("click", () => {
  token.clear();
  showLogin();
});

window.addEventListener("hashchange", () => {
  if (login.hidden) route();
});

start();
