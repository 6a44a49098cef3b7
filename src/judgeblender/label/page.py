"""The labeling page: one self-contained HTML document (CSS and JavaScript inline, no network).

Query and passage texts are set with textContent, never innerHTML: passages are web text
and may hold markup, which must show as text and never run.
"""

PAGE_HTML = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>judgeblender: relevance labeling</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
         background: #f4f5f7; color: #1d1f23; }
  header { background: #263238; color: #fff; padding: 10px 24px; display: flex; align-items: center; gap: 24px; }
  header h1 { font-size: 17px; margin: 0; font-weight: 600; }
  #progress-text { font-size: 14px; }
  progress { width: 240px; height: 12px; }
  main { display: grid; grid-template-columns: minmax(0, 1fr) 320px; gap: 20px; padding: 20px 24px;
         max-width: 1200px; }
  .card { background: #fff; border: 1px solid #d8dbe0; border-radius: 8px; padding: 16px 20px; }
  .meta { color: #5f6672; font-size: 12px; margin-bottom: 6px; }
  #query { font-size: 21px; font-weight: 600; margin: 0 0 4px; }
  #passage { font-size: 16px; line-height: 1.55; white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
  .buttons { display: flex; gap: 10px; margin-top: 16px; flex-wrap: wrap; }
  button { font-size: 15px; padding: 9px 14px; border-radius: 6px; border: 1px solid #9aa3ad; background: #fff;
           cursor: pointer; }
  button.level { min-width: 120px; text-align: left; }
  button.level kbd, button.nav kbd { font-weight: 700; margin-right: 6px; }
  button.current { background: #1565c0; color: #fff; border-color: #1565c0; }
  button:focus-visible { outline: 3px solid #ffb300; }
  #status { margin-top: 12px; font-size: 13px; color: #2e7d32; min-height: 18px; }
  #status.error { color: #c62828; font-weight: 600; }
  aside h2 { font-size: 15px; margin: 0 0 8px; }
  aside dl { margin: 0; font-size: 13px; line-height: 1.45; }
  aside dt { font-weight: 700; margin-top: 8px; }
  aside dd { margin: 0 0 0 0; }
  aside .keys { margin-top: 14px; font-size: 13px; }
  kbd { font-family: ui-monospace, monospace; background: #eceff1; border: 1px solid #b0bec5; border-radius: 3px;
        padding: 0 4px; color: #1d1f23; }
  #done { display: none; }
  a { color: #1565c0; }
</style>
</head>
<body>
<header>
  <h1>Relevance labeling</h1>
  <progress id="bar" max="1" value="0"></progress>
  <span id="progress-text">loading...</span>
</header>
<main>
  <section>
    <div class="card" id="item">
      <div class="meta" id="position"></div>
      <p class="meta">Query <span id="qid"></span></p>
      <p id="query"></p>
      <p class="meta">Passage <span id="docid"></span></p>
      <p id="passage"></p>
      <div class="buttons">
        <button class="level" data-label="3"><kbd>3</kbd>Perfectly relevant</button>
        <button class="level" data-label="2"><kbd>2</kbd>Highly relevant</button>
        <button class="level" data-label="1"><kbd>1</kbd>Related</button>
        <button class="level" data-label="0"><kbd>0</kbd>Irrelevant</button>
      </div>
      <div class="buttons">
        <button class="nav" id="back"><kbd>&larr;</kbd>Back</button>
        <button class="nav" id="skip"><kbd>s</kbd>Skip</button>
      </div>
      <div id="status" role="status"></div>
    </div>
    <div class="card" id="done">
      <h2>Every pair has been seen</h2>
      <p id="done-text"></p>
      <p><button id="first-open">Go to the first unlabelled pair</button> <button id="review">Review from the start</button></p>
    </div>
  </section>
  <aside class="card">
    <h2>Guidelines (TREC Deep Learning)</h2>
    <dl>
      <dt>3 Perfectly relevant</dt>
      <dd>The passage is dedicated to the query and contains the exact answer.</dd>
      <dt>2 Highly relevant</dt>
      <dd>The passage has some answer for the query, but the answer may be a bit unclear, or hidden amongst extraneous information.</dd>
      <dt>1 Related</dt>
      <dd>The passage seems related to the query but does not answer it.</dd>
      <dt>0 Irrelevant</dt>
      <dd>The passage has nothing to do with the query.</dd>
    </dl>
    <div class="keys">
      <p><kbd>0</kbd> <kbd>1</kbd> <kbd>2</kbd> <kbd>3</kbd> label and go on;
         <kbd>&larr;</kbd> or <kbd>b</kbd> back; <kbd>s</kbd> or <kbd>&rarr;</kbd> skip.</p>
      <p>Each label is saved the moment you give it; closing the page or stopping the server loses nothing,
         and the next start resumes at the first pair left.</p>
      <p>Labels so far: <a href="/qrels" id="qrels-link">qrels</a> (also written to <span id="out"></span> on every save).</p>
    </div>
  </aside>
</main>
<script>
"use strict";
let current = null;               // the item on screen
let chain = Promise.resolve();    // actions run one after another, so fast keys keep their order

const $ = (id) => document.getElementById(id);

async function api(path, body) {
  const opts = body === undefined ? {} :
    {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
  const res = await fetch(path, opts);
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

function showState(s) {
  $("bar").max = Math.max(s.total, 1);
  $("bar").value = s.labelled;
  $("progress-text").textContent = `${s.labelled} of ${s.total} labelled` + (s.skipped ? `, ${s.skipped} skipped` : "");
  $("out").textContent = s.out;
}

function status(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

async function show(i) {
  const item = await api(`/api/item?i=${i}`);
  current = item;
  $("done").style.display = "none";
  $("item").style.display = "";
  $("position").textContent = `pair ${item.i + 1} of ${$("bar").max}` + (item.skipped ? " (skipped before)" : "");
  $("qid").textContent = item.qid;
  $("docid").textContent = item.docid;
  $("query").textContent = item.query;      // textContent: markup in the text shows as text
  $("passage").textContent = item.passage;
  document.querySelectorAll("button.level").forEach((b) =>
    b.classList.toggle("current", item.label !== null && Number(b.dataset.label) === item.label));
}

function showDone(s) {
  current = null;
  $("item").style.display = "none";
  $("done").style.display = "block";
  $("done-text").textContent = `${s.labelled} of ${s.total} pairs labelled, ${s.skipped} skipped.`;
  $("first-open").disabled = s.resume === null;
}

function enqueue(action) {
  chain = chain.then(action).catch((e) => status(`not saved: ${e.message}`, true));
}

async function save(label) {
  if (!current) return;
  const s = await api("/api/label", {i: current.i, qid: current.qid, docid: current.docid, label: label});
  showState(s);
  status((label === null ? `skipped ${current.qid}/${current.docid}` : `saved ${label} for ${current.qid}/${current.docid}`)
         + (s.warning ? `, but ${s.warning}` : ""), Boolean(s.warning));
  if (s.next === null) showDone(s); else await show(s.next);
}

async function back() {
  const s = await api("/api/state");
  const i = current ? current.i - 1 : s.total - 1;
  if (i >= 0) await show(i);
}

async function start() {
  const s = await api("/api/state");
  showState(s);
  if (s.resume === null) showDone(s); else await show(s.resume);
}

document.addEventListener("keydown", (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const key = ev.key;
  if (["0", "1", "2", "3"].includes(key)) { ev.preventDefault(); enqueue(() => save(Number(key))); }
  else if (key === "s" || key === "ArrowRight") { ev.preventDefault(); enqueue(() => save(null)); }
  else if (key === "b" || key === "ArrowLeft" || key === "Backspace") { ev.preventDefault(); enqueue(back); }
});
document.querySelectorAll("button.level").forEach((b) =>
  b.addEventListener("click", () => enqueue(() => save(Number(b.dataset.label)))));
$("skip").addEventListener("click", () => enqueue(() => save(null)));
$("back").addEventListener("click", () => enqueue(back));
$("first-open").addEventListener("click", () => enqueue(start));
$("review").addEventListener("click", () => enqueue(() => show(0)));
chain = start().catch((e) => status(`cannot reach the labeling server: ${e.message}`, true));
</script>
</body>
</html>
"""
