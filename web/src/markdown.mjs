// A small, safe Markdown renderer for model replies (the demo and the <llamay-chat> widget share it).
//
//   import { renderMarkdown } from "../src/markdown.mjs";
//   bubble.replaceChildren(renderMarkdown(reply));   // a DocumentFragment
//
// Safe by construction: it builds DOM nodes and sets only textContent and a few attributes, never innerHTML,
// so a model (or a stored conversation) that writes <script> or <img onerror> shows those characters as text.
// Links keep http(s) and mailto targets only (anything else, javascript: included, stays text).
//
// What it reads (the Markdown models write, CommonMark's spelling, not all of its corner cases): paragraphs
// (single line breaks kept), ATX headings, unordered (- * +) and ordered (1. 1)) lists, nested by indentation,
// > quotes, --- rules, fenced code blocks (``` or ~~~, with a language; an unclosed fence runs to the end, as
// while a reply streams) with a copy button, and inline `code`, **strong**, *em* / _em_, ~~strike~~,
// [links](https://...) and backslash escapes.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const ESCAPABLE = "\\`*_{}[]()#+-.!~>|";
const SAFE_URL = /^(https?:\/\/|mailto:)/i;
const MAX_DEPTH = 8; // nesting kept (quotes in lists in quotes...); deeper text stays as written

/** The nodes of `text` as Markdown: a DocumentFragment of the document `opts.document` (default: this one). */
export function renderMarkdown(text, opts = {}) {
  const doc = opts.document ?? globalThis.document;
  const frag = doc.createDocumentFragment();
  blocks(
    doc,
    String(text ?? "")
      .replace(/\r\n?/g, "\n")
      .split("\n"),
    frag,
    0,
  );
  return frag;
}

/** Copy `text` to the clipboard; resolves true when it was copied. */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return copyBySelection(text); // no Clipboard API: a page over plain http (a phone on the LAN), a denied prompt
  }
}

/** The older way, which plain-http pages still have: select the text in an off-screen box and copy it. */
function copyBySelection(text) {
  const doc = globalThis.document;
  if (!doc?.body || typeof doc.execCommand !== "function") return false;
  const box = doc.createElement("textarea");
  box.value = text;
  box.setAttribute("readonly", "");
  box.style.cssText = "position: fixed; top: 0; left: -9999px; opacity: 0";
  doc.body.append(box);
  const focused = doc.activeElement;
  box.select();
  let ok = false;
  try {
    ok = doc.execCommand("copy");
  } catch {
    ok = false;
  }
  box.remove();
  focused?.focus?.({ preventScroll: true });
  return ok;
}

function make(doc, tag, cls, text) {
  const node = doc.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function blocks(doc, lines, parent, depth) {
  let i = 0;
  let para = [];
  const flush = () => {
    if (!para.length) return;
    const p = make(doc, "p");
    para.forEach((line, k) => {
      if (k) p.append(make(doc, "br"));
      inline(doc, line.trim(), p, depth);
    });
    parent.append(p);
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) {
      flush();
      i++;
    } else if ((m = FENCE.exec(line))) {
      flush();
      const close = new RegExp(`^ {0,3}${m[1][0] === "`" ? "`" : "~"}{${m[1].length},}\\s*$`);
      const body = [];
      i++;
      while (i < lines.length && !close.test(lines[i])) body.push(lines[i++]);
      const closed = i < lines.length;
      i++;
      parent.append(codeBlock(doc, body.join("\n"), m[2], closed));
    } else if ((m = HEADING.exec(line))) {
      flush();
      const h = make(doc, `h${Math.min(6, m[1].length + 2)}`, "md-heading"); // h3..h6: a reply's headings are small
      inline(doc, m[2], h, depth);
      parent.append(h);
      i++;
    } else if (RULE.test(line) && !para.length) {
      parent.append(make(doc, "hr"));
      i++;
    } else if (depth < MAX_DEPTH && QUOTE.test(line)) {
      flush();
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i++;
      }
      const q = make(doc, "blockquote");
      blocks(doc, inner, q, depth + 1);
      parent.append(q);
    } else if (depth < MAX_DEPTH && (m = ITEM.exec(line)) && (!para.length || m[1].length === 0)) {
      flush();
      i = list(doc, lines, i, parent, depth);
    } else {
      para.push(line);
      i++;
    }
  }
  flush();
}

/** A list starting at lines[i]; returns the index after it. Items indented deeper than its own nest inside. */
function list(doc, lines, i, parent, depth) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = make(doc, ordered ? "ol" : "ul");
  if (ordered && Number.parseInt(first[2], 10) !== 1) node.start = Number.parseInt(first[2], 10);
  parent.append(node);
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3]];
    i++;
    // the item's own lines: indented further than its marker, or lazy continuations of its text
    while (i < lines.length && lines[i].trim()) {
      const next = ITEM.exec(lines[i]);
      const lead = lines[i].length - lines[i].trimStart().length;
      if (next && next[1].length <= indent) break;
      if (!next && lead <= indent && (FENCE.test(lines[i]) || HEADING.test(lines[i]))) break;
      body.push(lines[i].slice(Math.min(lead, indent + 2)));
      i++;
    }
    const li = make(doc, "li");
    blocks(doc, body, li, depth + 1);
    // a tight item (no blank line inside) holds its text without paragraphs
    if (!body.some((l) => !l.trim())) for (const p of li.querySelectorAll(":scope > p")) p.replaceWith(...p.childNodes);
    node.append(li);
    // a blank line between items of the same list does not end it
    if (i < lines.length && !lines[i].trim()) {
      const after = lines.slice(i).findIndex((l) => l.trim());
      const nextItem = after >= 0 ? ITEM.exec(lines[i + after]) : null;
      if (nextItem && nextItem[1].length === indent && /\d/.test(nextItem[2]) === ordered) i += after;
    }
  }
  return i;
}

function codeBlock(doc, code, lang, closed) {
  const box = make(doc, "div", "md-code");
  const head = make(doc, "div", "md-code-head");
  head.append(make(doc, "span", "md-lang", lang || "code"));
  const button = make(doc, "button", "md-copy", "Copy");
  button.type = "button";
  button.setAttribute("aria-label", lang ? `Copy the ${lang} code` : "Copy the code");
  button.dataset.testid = "copy-code";
  button.addEventListener("click", async () => {
    const ok = await copyText(code);
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => (button.textContent = "Copy"), 1500);
  });
  head.append(button);
  const pre = make(doc, "pre");
  const c = make(doc, "code", lang ? `language-${lang}` : undefined, code);
  pre.append(c);
  box.append(head, pre);
  if (!closed) box.classList.add("open");
  return box;
}

/** Inline Markdown of `text` appended to `parent`. */
function inline(doc, text, parent, depth) {
  let buf = "";
  const flush = () => {
    if (buf) parent.append(doc.createTextNode(buf));
    buf = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\" && ESCAPABLE.includes(text[i + 1] ?? "\n")) {
      buf += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      const run = /^`+/.exec(text.slice(i))[0];
      const end = findRun(text, run, i + run.length);
      if (end >= 0) {
        flush();
        let code = text.slice(i + run.length, end);
        if (/^ .* $/.test(code)) code = code.slice(1, -1);
        parent.append(make(doc, "code", undefined, code));
        i = end + run.length;
        continue;
      }
      buf += run;
      i += run.length;
      continue;
    }
    if ((c === "*" || c === "_" || c === "~") && depth < MAX_DEPTH) {
      const span = emphasis(text, i);
      if (span) {
        flush();
        const node = make(doc, span.tag);
        inline(doc, text.slice(span.start, span.end), node, depth + 1);
        parent.append(node);
        i = span.after;
        continue;
      }
    }
    if (c === "[" && depth < MAX_DEPTH) {
      const m = /^\[([^\]\n]+)\]\(([^()\s]+)(?:\s+"[^"]*")?\)/.exec(text.slice(i));
      if (m && SAFE_URL.test(m[2])) {
        flush();
        const a = make(doc, "a");
        a.href = m[2];
        a.target = "_blank";
        a.rel = "noopener noreferrer nofollow";
        inline(doc, m[1], a, depth + 1);
        parent.append(a);
        i += m[0].length;
        continue;
      }
    }
    buf += c;
    i++;
  }
  flush();
}

/** The index of the next run of exactly `run` backticks from `from`, or -1. */
function findRun(text, run, from) {
  for (let at = text.indexOf(run, from); at >= 0; at = text.indexOf(run, at + 1)) {
    const before = text[at - 1];
    const after = text[at + run.length];
    if (before !== "`" && after !== "`") return at;
    while (text[at + 1] === "`") at++;
  }
  return -1;
}

const WORD = /[\p{L}\p{N}]/u;
const SPACE = /\s/;

/** An emphasis span opening at text[i]: {tag, start, end, after}, or null when its delimiter does not close. */
function emphasis(text, i) {
  const c = text[i];
  const double = text[i + 1] === c;
  if (c === "~" && !double) return null;
  const delim = double ? c + c : c;
  const start = i + delim.length;
  if (start >= text.length || SPACE.test(text[start])) return null;
  if (c === "_" && i > 0 && WORD.test(text[i - 1])) return null; // snake_case stays as written
  for (let at = text.indexOf(delim, start + 1); at >= 0; at = text.indexOf(delim, at + 1)) {
    if (SPACE.test(text[at - 1])) continue;
    if (!double && text[at + 1] === c) {
      at++; // part of a ** inside a * span: skip the pair
      continue;
    }
    if (c === "_" && WORD.test(text[at + delim.length] ?? "")) continue;
    const tag = c === "~" ? "del" : double ? "strong" : "em";
    return { tag, start, end: at, after: at + delim.length };
  }
  return null;
}
