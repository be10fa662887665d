// Ask: the Oracle's answer streamed as it is written, citations as links, sources under it;
// follow-up questions carry the conversation, as `gleambrctl chat` does.

import { getJson, postEvents } from "./api.js";
import { el, fileHref, withCitations } from "./dom.js";

const history = []; // {role, content} of this tab's conversation, oldest first

function sourcesList(sources) {
  return el("ol", { class: "sources" }, sources.map((s) =>
    el("li", { class: s.cited ? "cited" : "" },
      el("a", { href: fileHref(s.path, s.start_line, s.end_line) }, `${s.path}:${s.start_line}`),
      ` ${s.name || ""}`, s.cited ? " (cited)" : "")));
}

export function showAsk(main, params) {
  const llm = el("p", { class: "llm", id: "llm" }, "checking the LLM…");
  const conversation = el("div", { id: "conversation" });
  const question = el("textarea", { id: "question", placeholder: "Ask about the code (Ctrl+Enter sends)", rows: 2 });
  const send = el("button", { type: "submit", id: "ask-send" }, "Ask");
  const reset = el("button", { type: "button", class: "quiet", id: "ask-new" }, "New conversation");
  const form = el("form", { class: "askform" }, question, send, reset);
  main.replaceChildren(el("section", { class: "ask" }, llm, conversation, form));
  let controller = null;

  getJson("/llm").then((info) => {
    llm.replaceChildren(info.configured
      ? `answers from ${info.provider} / ${info.model}`
      : el("span", { class: "error", id: "llm-missing" }, info.error || "no LLM provider is configured"));
  }).catch((error) => llm.replaceChildren(el("span", { class: "error" }, error.message)));

  function drawPast() {
    conversation.replaceChildren();
    for (let i = 0; i + 1 < history.length; i += 2) {
      conversation.append(el("div", { class: "turn" },
        el("div", { class: "q" }, history[i].content),
        el("div", { class: "a" }, withCitations(history[i + 1].content))));
    }
  }
  drawPast();

  async function ask(text) {
    const answer = el("div", { class: "a", "aria-live": "polite" });
    const status = el("div", { class: "dim" }, "retrieving…");
    const turn = el("div", { class: "turn" }, el("div", { class: "q" }, text), status, answer);
    conversation.append(turn);
    turn.scrollIntoView({ block: "end" });
    let written = "";
    let final = null;
    let failure = null;
    let frame = 0;
    const redraw = () => { frame = 0; answer.replaceChildren(...withCitations(written)); };
    controller = new AbortController();
    send.disabled = true;
    try {
      await postEvents("/ask", { question: text, history: history.slice(), stream: true }, (event, data) => {
        if (event === "context") status.textContent = `${data.chunks.length} chunks sent; writing…`;
        else if (event === "token") {
          written += data;
          if (!frame) frame = requestAnimationFrame(redraw);
        } else if (event === "answer") final = data;
        else if (event === "error") failure = data;
      }, controller.signal);
    } catch (error) {
      if (error.name !== "AbortError") failure = { error: error.message };
    } finally {
      send.disabled = false;
      controller = null;
    }
    if (frame) cancelAnimationFrame(frame);
    if (final) written = final.answer || written;
    answer.replaceChildren(...withCitations(written));
    status.textContent = final && final.provider ? `answered by ${final.provider} / ${final.model}` : "";
    if (failure) turn.append(el("p", { class: "error ask-error" }, failure.error));
    if (final && final.sources && final.sources.length) turn.append(el("div", { class: "dim" }, "Sources"), sourcesList(final.sources));
    if (final && !failure && written) history.push({ role: "user", content: text }, { role: "assistant", content: written });
    document.body.dataset.answered = String(history.length);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = question.value.trim();
    if (!text || controller) return;
    question.value = "";
    ask(text);
  });
  question.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  reset.addEventListener("click", () => { history.length = 0; drawPast(); question.focus(); });
  const asked = params.get("ask");
  if (asked) ask(asked);
  else question.focus();
  return {
    focus: () => question.focus(),
    leave: () => { if (controller) controller.abort(); },
  };
}
