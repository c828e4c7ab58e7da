/*
 * haggler's haggling chat widget: a shopper haggles with the store's merchant agent over one
 * product, from any web page. Put it where the chat should appear:
 *
 *   <script src="https://store.example/widget.js" data-product="PRODUCT_ID"></script>
 *
 * Plain, hand-written JavaScript served by the store as is: no build step, no dependencies.
 * The store is wherever this file was served from, so the widget works on any origin (the
 * store's API answers every origin, and exposes Retry-After to it). It drives negotiate.v1's
 * optional POST endpoints (§5) and reads the history (§3.3) to resume a chat after a reload
 * and to learn, after a lost connection, whether a message landed: a turn is never sent twice.
 *
 * It renders into an open shadow root right after its own <script> tag, so the host page's
 * styles neither break it nor are broken by it. Everything the store says is inserted as text
 * (textContent), never as HTML.
 */
(() => {
  "use strict";

  const script = document.currentScript;
  const productId = script && script.dataset.product;
  if (!productId) {
    console.error('haggler widget: give its <script> tag data-product="PRODUCT_ID"');
    return;
  }

  /** The store's base URL: the directory this script was served from. */
  const base = new URL(".", script.src);
  const api = (path) => new URL(path, base).href;
  const REQUEST_TIMEOUT_MS = 20000;
  /** A turn may wait on the merchant's language model (its retries included): longer than that,
   * so that a slow answer is never taken for a lost one and the turn resent while in progress. */
  const TURN_TIMEOUT_MS = 120000;
  /** When a 429 carries no readable Retry-After. */
  const DEFAULT_WAIT_SECONDS = 60;
  const MAX_RECONNECT_DELAY_SECONDS = 30;
  /** Server errors (5xx) in a row on one turn before the widget stops resending it. */
  const MAX_SERVER_FAILURES = 3;
  /** What the buttons say for the shopper: words the merchant reads as those moves. */
  const ACCEPT_TEXT = "Deal!";
  const WALK_AWAY_TEXT = "No thanks, I'll pass.";
  const QUICK_REPLIES = [["Best price?", "What's your best price?"], ["Shipping?", "Is shipping included?"]];
  const CLOSED_ERROR = "this chat is closed";
  /** An amount on its own ("450", "$1,299.99"): sent as "How about $450?", which the merchant reads as an offer. */
  const AMOUNT = /^\s*[$€£]?\s*(\d{1,3}(?:,\d{3})+|\d+)(\.\d{1,2})?\s*$/;

  const STYLE = `
    :host{all:initial;display:block;margin:1.5rem 0;font:16px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2530}
    [hidden]{display:none!important}
    .hw{border:1px solid #c9d2dc;border-radius:.75rem;padding:1rem 1.25rem;background:#fff;max-width:40rem}
    h2{font-size:1.25rem;margin:0 0 .25rem}h3{font-size:1rem;margin:0}
    p{margin:.4rem 0}.muted{color:#4f5b6a}
    .offer{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem .75rem;background:#f3f6fa;border-radius:.5rem;padding:.6rem .8rem;margin:.75rem 0}
    .price{font-size:1.4rem;font-weight:700}
    .chips{display:flex;flex-wrap:wrap;gap:.4rem;list-style:none;margin:0;padding:0}
    .chips li{background:#e1ecfd;color:#123f8c;border-radius:999px;padding:.15rem .65rem;font-size:.875rem}
    .log{margin:.75rem 0;padding:.25rem;max-height:22rem;overflow-y:auto;display:flex;flex-direction:column;gap:.5rem}
    .log .line{margin:0;max-width:85%;padding:.45rem .7rem;border-radius:.7rem;white-space:pre-wrap;overflow-wrap:anywhere}
    .log .merchant{background:#f3f6fa;align-self:flex-start}
    .log .shopper{background:#0b57d0;color:#fff;align-self:flex-end}
    .log .pending{font-style:italic}
    .who{font-weight:600;margin-right:.35rem}
    .status{min-height:1.45em;color:#4f5b6a}
    form{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end}
    .field{flex:1 1 14rem;display:flex;flex-direction:column;gap:.2rem}
    label{font-weight:600}.hint{font-size:.875rem;color:#4f5b6a}
    input{font:inherit;padding:.45rem .6rem;border:1px solid #5f6b7a;border-radius:.4rem;min-width:0}
    button{font:inherit;cursor:pointer;padding:.45rem .9rem;border-radius:.4rem;border:1px solid #5f6b7a;background:#fff;color:#1d2530}
    button.primary{background:#0b57d0;border-color:#0b57d0;color:#fff}
    button[aria-disabled=true],button:disabled,input:disabled{cursor:not-allowed;opacity:.6}
    .row{display:flex;flex-wrap:wrap;gap:.5rem;margin-top:.6rem}
    .deal{background:#e6f4ea;color:#124a26;border-radius:.5rem;padding:.6rem .8rem;margin-top:.75rem}
    .deal a{color:#0a4bb5;font-weight:700}
    .closed{background:#fdf3e6;color:#5c3604;border-radius:.5rem;padding:.6rem .8rem;margin-top:.75rem}
    a:focus-visible,button:focus-visible,input:focus-visible,.log:focus-visible{outline:3px solid #0b57d0;outline-offset:2px}
  `;

  // -- the DOM -------------------------------------------------------------------------------

  /** An element: attributes, `text` (set as textContent), `on<event>` listeners, then children. */
  function h(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value);
    }
    node.append(...children);
    return node;
  }

  const ui = {};
  ui.start = h("button", {type: "button", class: "primary", text: "Start haggling", onclick: () => startChat()});
  ui.price = h("span", {class: "price"});
  ui.chips = h("ul", {class: "chips", "aria-label": "Extras included"});
  ui.offer = h("div", {class: "offer", hidden: ""},
    h("h3", {text: "Current offer:"}), ui.price, ui.chips);
  ui.log = h("div", {class: "log", role: "log", "aria-live": "polite", "aria-label": "Conversation",
    tabindex: "0", hidden: ""});
  ui.status = h("p", {class: "status", role: "status"});
  ui.countdown = h("p", {class: "countdown muted", hidden: ""});
  ui.input = h("input", {id: "hw-message", name: "message", type: "text", autocomplete: "off",
    "aria-describedby": "hw-hint"});
  ui.send = h("button", {type: "submit", class: "primary", text: "Send"});
  ui.form = h("form", {hidden: "", onsubmit: onSubmit},
    h("div", {class: "field"},
      h("label", {for: "hw-message", text: "Your offer or message"}),
      h("span", {id: "hw-hint", class: "hint", text: "Type an amount to make an offer, or ask a question."}),
      ui.input),
    ui.send);
  ui.quick = QUICK_REPLIES.map(([label, message]) =>
    h("button", {type: "button", text: label, onclick: () => sendTurn(message)}));
  ui.accept = h("button", {type: "button", class: "primary", text: "Accept", onclick: () => sendTurn(ACCEPT_TEXT)});
  ui.walk = h("button", {type: "button", text: "Walk away",
    onclick: () => sendTurn(WALK_AWAY_TEXT, "You walked away from this chat.")});
  ui.actions = h("div", {hidden: ""},
    h("div", {class: "row", role: "group", "aria-label": "Quick replies"}, ...ui.quick),
    h("div", {class: "row", role: "group", "aria-label": "Decide"}, ui.accept, ui.walk));
  /** Every button that sends a turn: off while the chat is not open, aria-disabled while busy. */
  ui.turnButtons = [ui.send, ...ui.quick, ui.accept, ui.walk];
  ui.dealText = h("p");
  ui.checkout = h("a", {text: "Go to checkout"});
  ui.deal = h("div", {class: "deal", hidden: ""}, ui.dealText, h("p", {}, ui.checkout));
  ui.closedText = h("p");
  ui.newChat = h("button", {type: "button", text: "Start a new chat", onclick: () => startChat()});
  ui.closed = h("div", {class: "closed", hidden: ""}, ui.closedText, ui.newChat);
  ui.section = h("section", {class: "hw", "aria-labelledby": "hw-title"},
    h("h2", {id: "hw-title", text: "Haggle over the price"}),
    h("p", {class: "muted", text: "Make an offer: the store's sales agent answers right away."}),
    ui.offer, ui.log, ui.status, ui.countdown, ui.start, ui.form, ui.actions, ui.deal, ui.closed);

  const host = h("div", {class: "haggler-widget", "data-product": productId});
  script.after(host);
  const root = host.attachShadow({mode: "open"});
  root.append(h("style", {text: STYLE}), ui.section);

  // -- the chat's state ----------------------------------------------------------------------

  /** The state before any chat: on load, and again when a new chat starts. */
  const noChat = () => ({
    id: null,
    /** What the log shows, as the store recorded it: [{speaker, message}]. */
    lines: [],
    offer: null,
    closed: false,
    deal: null,
    /** Why the chat closed, in words (shown when it closed without a deal). */
    why: "",
  });
  const chat = noChat();
  let busy = false;

  const saved = {
    key: `haggler-chat:${base.href}:${productId}`,
    get() {
      try { return localStorage.getItem(this.key); } catch { return null; }
    },
    set(id) {
      try { localStorage.setItem(this.key, id); } catch { /* storage blocked: the chat lasts as long as the page */ }
    },
    clear() {
      try { localStorage.removeItem(this.key); } catch { /* as above */ }
    },
  };

  // -- talking to the store ------------------------------------------------------------------

  /** One request: {status, data, retryAfter}, or null when no answer came (offline, timed out,
   * cut off). */
  async function request(method, url, body, timeoutMs = REQUEST_TIMEOUT_MS) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const response = await fetch(url, {
        method, signal: controller.signal, cache: "no-store", credentials: "omit",
        headers: body ? {"Content-Type": "application/json"} : {},
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await response.text();
      let data = {};
      try { data = JSON.parse(text); } catch { /* not JSON (a proxy's error page): the status speaks */ }
      const retryAfter = Number.parseInt(response.headers.get("Retry-After") || "", 10);
      return {status: response.status, data, retryAfter: retryAfter >= 0 ? retryAfter : DEFAULT_WAIT_SECONDS};
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  const chatUrl = () => api(`api/store/chat/${encodeURIComponent(chat.id)}`);

  /** The chat's history, asked for until the store answers (null: the store forgot the chat). */
  async function readHistory(why = "") {
    if (why) announce(why);
    for (let delay = 1; ; delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_SECONDS)) {
      const result = await request("GET", chatUrl());
      if (result && result.status === 200) return result.data;
      if (result && result.status === 404) return null;
      announce(navigator.onLine === false
        ? "You're offline. The chat carries on by itself once you're back online."
        : `Still can't reach the store. Trying again in ${inWords(delay)}.`);
      await pause(delay);
    }
  }

  /** Wait ``seconds``, or less if the browser comes back online. */
  function pause(seconds) {
    return new Promise((resolve) => {
      const done = () => { clearTimeout(timer); window.removeEventListener("online", done); resolve(); };
      const timer = setTimeout(done, seconds * 1000);
      window.addEventListener("online", done);
    });
  }

  /** Honour a 429: say why and how long in words, count down, and resolve when it is time. */
  function waitOut(seconds, why) {
    announce(`${why} The chat will try again by itself in ${inWords(seconds)}.`);
    const deadline = Date.now() + seconds * 1000;
    ui.countdown.hidden = false;
    return new Promise((resolve) => {
      const tick = () => {
        const left = Math.ceil((deadline - Date.now()) / 1000);
        if (left > 0) {
          ui.countdown.textContent = `Trying again in ${inWords(left)}.`;
          return;
        }
        clearInterval(timer);
        ui.countdown.hidden = true;
        announce("Trying again now…");
        resolve();
      };
      const timer = setInterval(tick, 1000);
      tick();
    });
  }

  // -- the flows -----------------------------------------------------------------------------

  async function startChat() {
    if (busy) return;
    setBusy(true);
    Object.assign(chat, noChat());
    ui.log.replaceChildren();
    render();
    announce("Starting a chat…");
    let result = null;
    for (;;) {
      result = await request("POST", api("api/store/chat/start"), {product_id: productId});
      if (!result) {  // no answer: a 429 waited out before is no longer the news
        announce("Couldn't reach the store. Check your connection, then start again.");
        break;
      }
      if (result.status !== 429) break;
      await waitOut(result.retryAfter, "Too many chats have been started from your address in the last hour.");
    }
    setBusy(false);
    if (result && result.status === 201) {
      chat.id = result.data.session_id;
      saved.set(chat.id);
      chat.offer = result.data.offer || null;
      appendLines([{speaker: "merchant", message: result.data.greeting}]);
      announce("");
      render();
      ui.input.focus();
    } else if (result) {
      announce(result.status === 404 ? "This store doesn't sell that product." : errorText(result));
      render();
    }
  }

  /** Pick up a chat this browser had with the store: transcript, offer, closed state, deal. */
  async function resume(id) {
    chat.id = id;
    setBusy(true);
    render();
    const history = await readHistory();
    setBusy(false);
    if (history === null) {
      saved.clear();
      chat.id = null;
      announce("Your earlier chat has expired. Start a new one whenever you like.");
    } else {
      applyHistory(history, "This chat has ended.");
    }
    render();
  }

  /** Send one shopper turn and show the answer; false when the store refused it (the reason
   * is announced). ``why`` is what to say if the turn closes the chat. */
  async function sendTurn(message, why = "The seller has closed this chat.") {
    if (busy || !chat.id || chat.closed) return false;
    setBusy(true);
    const before = chat.lines.length;
    const pending = lineNode("shopper", message);
    pending.classList.add("pending");
    ui.log.append(pending);
    scrollLog();
    announce("Waiting for the seller…");
    const result = await deliver(message, before);
    pending.remove();
    let sent = true;
    if ("history" in result) {
      applyHistory(result.history, why);
    } else if (result.status === 200) {
      appendLines([{speaker: "shopper", message}, {speaker: "merchant", message: result.data.message}]);
      takeState(result.data, why);
    } else if (result.status === 400 && result.data.error === CLOSED_ERROR) {
      const closedWhy = "This chat is closed: it ended, or sat idle too long.";
      const history = await readHistory();
      if (history) applyHistory(history, closedWhy);
      Object.assign(chat, {closed: true, offer: null, why: closedWhy});
    } else if (result.status === 404) {
      saved.clear();
      Object.assign(chat, {closed: true, offer: null, why: "The store no longer has this chat."});
      announce("");
    } else {
      announce(errorText(result));
      sent = false;
    }
    setBusy(false);
    render();
    if (sent) settleFocus();
    return sent;
  }

  /**
   * POST the turn until the store has it exactly once. A 429 is waited out (the turn was not
   * taken). When no answer comes, the history tells whether the turn landed; only if it did
   * not is it sent again. A store that keeps failing (5xx) is given up on after a few tries.
   * Returns the answer ({status, data}) or, after a recovery, {history}.
   */
  async function deliver(message, before) {
    for (let failures = 0; ;) {
      const result = await request("POST", `${chatUrl()}/message`, {message}, TURN_TIMEOUT_MS);
      if (result && result.status === 429) {
        await waitOut(result.retryAfter, "The store asked to slow down.");
        continue;
      }
      if (result && result.status < 500) return result;
      // No answer, or a server error: the turn may have been recorded all the same.
      const history = await readHistory("Connection lost. Checking whether your message reached the store…");
      if (history === null) return {status: 404, data: {}};
      if (history.closed || history.history.slice(before).some(
        (line) => line.speaker === "shopper" && line.message === message)) {
        return {history};
      }
      if (result && ++failures >= MAX_SERVER_FAILURES) return result;
      announce("Your message didn't reach the store. Sending it again…");
    }
  }

  function applyHistory(history, why) {
    showConversation(history.history);
    takeState(history, why);
  }

  /** Take the offer, deal and closed flag that a reply and the history both carry; ``why`` is
   * what to say if the chat is closed. */
  function takeState(answer, why) {
    Object.assign(chat, {offer: answer.offer || null, deal: answer.deal || null, closed: Boolean(answer.closed),
      why: answer.closed ? why : ""});
    announce("");
  }

  function onSubmit(event) {
    event.preventDefault();
    const typed = ui.input.value.trim();
    if (!typed) {
      announce("Type an amount or a message first.");
      return;
    }
    if (busy) {
      announce("One moment: the seller is still answering.");
      return;
    }
    ui.input.value = "";
    sendTurn(asOffer(typed) || typed).then((sent) => {
      if (!sent && !ui.input.value) ui.input.value = typed;
    });
  }

  // -- showing it ----------------------------------------------------------------------------

  /** One line of the log: who said it, and what. */
  function lineNode(speaker, message) {
    const shopper = speaker === "shopper";
    return h("p", {class: shopper ? "line shopper" : "line merchant"},
      h("span", {class: "who", text: shopper ? "You:" : "Seller:"}), message);
  }

  /** Add lines to the log, as the store recorded them. */
  function appendLines(lines) {
    for (const line of lines) {
      ui.log.append(lineNode(line.speaker, line.message));
      chat.lines.push({speaker: line.speaker, message: line.message});
    }
    scrollLog();
  }

  /** Show the whole conversation so far: append what the log lacks, or redraw the log when
   * what it shows is not the start of ``entries``. */
  function showConversation(entries) {
    const shown = chat.lines;
    const prefix = shown.length <= entries.length &&
      shown.every((line, i) => line.speaker === entries[i].speaker && line.message === entries[i].message);
    if (!prefix) {
      chat.lines = [];
      ui.log.replaceChildren();
    }
    appendLines(entries.slice(chat.lines.length));
  }

  function render() {
    const open = Boolean(chat.id) && !chat.closed;
    ui.start.hidden = Boolean(chat.id);
    ui.log.hidden = chat.lines.length === 0;
    ui.form.hidden = !chat.id;
    ui.actions.hidden = !open;
    for (const control of [ui.input, ...ui.turnButtons]) control.disabled = !open;
    ui.offer.hidden = !(open && chat.offer);
    if (chat.offer) {
      const price = money(chat.offer.price, chat.offer.currency);
      ui.price.textContent = price;
      ui.chips.replaceChildren(...chat.offer.extras.map((extra) => h("li", {text: extra})));
      ui.chips.hidden = chat.offer.extras.length === 0;
      ui.accept.textContent = `Accept ${price}`;
    }
    ui.deal.hidden = !chat.deal;
    if (chat.deal) {
      const extras = chat.deal.extras.length ? ` with ${chat.deal.extras.join(", ")}` : "";
      ui.dealText.textContent = `Deal! ${money(chat.deal.price, chat.deal.currency)}${extras}.`;
      const href = webUrl(chat.deal.checkout_url);
      if (href) ui.checkout.setAttribute("href", href);
    }
    ui.closed.hidden = !(chat.closed && !chat.deal);
    ui.closedText.textContent = chat.why;
  }

  /** After a turn, focus where the next step is, but only within the widget: never pull focus
   * away from somewhere else on the host page. */
  function settleFocus() {
    const active = root.activeElement;
    if (!active && document.activeElement !== document.body) return;
    if (chat.deal) ui.checkout.focus();
    else if (chat.closed) ui.newChat.focus();
    else if (!active || active.disabled) ui.input.focus();
  }

  function setBusy(value) {
    busy = value;
    ui.section.setAttribute("aria-busy", String(value));
    for (const button of [ui.start, ...ui.turnButtons]) {
      button.setAttribute("aria-disabled", String(value));
    }
  }

  function announce(text) {
    ui.status.textContent = text;
  }

  function scrollLog() {
    ui.log.scrollTop = ui.log.scrollHeight;
  }

  // -- words and numbers ---------------------------------------------------------------------

  function money(amount, currency) {
    const whole = Number.isInteger(amount);
    try {
      return new Intl.NumberFormat("en-US", {style: "currency", currency,
        minimumFractionDigits: whole ? 0 : 2, maximumFractionDigits: 2}).format(amount);
    } catch {
      return `${amount} ${currency}`;
    }
  }

  /** "450" or "$1,299.99" typed alone becomes "How about $450?" in the offer's currency. */
  function asOffer(typed) {
    const match = AMOUNT.exec(typed);
    if (!match) return null;
    const amount = Number(match[1].replace(/,/g, "") + (match[2] || ""));
    return amount > 0 ? `How about ${money(amount, chat.offer ? chat.offer.currency : "USD")}?` : null;
  }

  function inWords(seconds) {
    const unit = (n, word) => (n ? [`${n} ${word}${n === 1 ? "" : "s"}`] : []);
    const hours = Math.floor(seconds / 3600);
    const minutes = Math.floor((seconds % 3600) / 60);
    const rest = seconds % 60;
    const parts = hours ? [...unit(hours, "hour"), ...unit(minutes, "minute")]
      : [...unit(minutes, "minute"), ...unit(rest, "second")];
    return parts.join(" ") || "a moment";
  }

  function errorText(result) {
    const said = result.data && typeof result.data.error === "string" ? result.data.error : "";
    return said ? `The store said: ${said}.` : `The store couldn't answer (HTTP ${result.status}). Try again.`;
  }

  /** A link the store sent, if it is a web address (never javascript: or the like). */
  function webUrl(value) {
    try {
      const url = new URL(value, base);
      return url.protocol === "https:" || url.protocol === "http:" ? url.href : null;
    } catch {
      return null;
    }
  }

  const earlier = saved.get();
  render();
  if (earlier) resume(earlier);
})();
