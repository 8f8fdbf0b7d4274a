// gen_corpus.js - writes the tokenizer test corpus to stdout: one test case per line
// ('\n'-separated, raw bytes, some deliberately not valid UTF-8).
//
//   node tests/tokenizer/gen_corpus.js [N_RANDOM_LINES] [SEED] > corpus.txt
//
// Deterministic for a given N and seed. First come hand-written lines, each aimed at
// one rule of the tokenizer (regex alternatives, NFC, added tokens, byte map,
// invalid UTF-8); then N lines mixed at random from fragments of many scripts, so
// that the rules meet each other in unplanned ways.
"use strict";

const N = parseInt(process.argv[2] || "3000", 10);
let seed = parseInt(process.argv[3] || "20261129", 10) >>> 0;

// xorshift32: small, deterministic, the same on every machine.
function rand() {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
  "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
  "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
  "</tool_response>", "<think>", "</think>"];

const FRAGMENTS = {
  en: ["The quick brown fox jumps over the lazy dog.", "Hello, world!", "It's a cat; it isn't a dog.",
    "They'll say we'd've known.", "I'M SURE YOU'RE RIGHT, AREN'T YOU?", "Don'T wORRy'S", "we've", "O'Neil's",
    "e-mail: someone@example.com", "https://example.org/path?q=1&r=2#frag", "state-of-the-art", "U.S.A.",
    "(parenthetical) [bracketed] {braced}", "\"quoted\" and 'single'", "50% off!!!", "$1,234.56", "A cat on a mat."],
  zh: ["你好，世界！", "机器学习是人工智能的一个分支。", "我们今天去公园散步吧", "数据并行训练", "（括号）《书名》、顿号"],
  ja: ["こんにちは世界", "東京タワーは333メートルです。", "カタカナとひらがな", "ｶﾀｶﾅ半角", "日本語の文章です。"],
  ko: ["안녕하세요 세계", "한국어 텍스트입니다.", "토크나이저 테스트"],
  ar: ["مرحبا بالعالم", "هذا نص عربي.", "اللغة العربية ١٢٣"],
  hi: ["नमस्ते दुनिया", "यह हिंदी पाठ है।", "क्षत्रिय ज्ञान"],
  ru: ["Привет, мир!", "Съешь же ещё этих мягких французских булок.", "ПРОПИСНЫЕ буквы"],
  other: ["Γειά σου κόσμε", "שלום עולם", "สวัสดีชาวโลก", "Xin chào thế giới", "Ελληνικά", "ქართული", "Zürich Straße",
    "naïve café résumé", "ﬁ ligature", "Ⅻ roman ½ fraction ² superscript", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math", "ǅ titlecase"],
  emoji: ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵🇺🇸", "1️⃣", "❤️‍🔥", "👩🏿‍💻", "🧑‍🤝‍🧑", "🙂🙃", "✨🚀"],
  digits: ["0", "7", "42", "123", "2026", "3.14159", "1,000,000", "12345678901234567890", "٣٤٥", "१२३", "１２３"],
  code: ["def f(x):", "    return x * 2", "\tif (a && b) { c++; }", "for (int i = 0; i < n; i++)",
    "    # comment", "x = {'k': [1, 2, 3]}", "#include <stdio.h>", "    }", "\t\tfoo(bar);", "a<=b>=c!=d==e",
    "console.log(`${x}`);", "SELECT * FROM t WHERE id = 1;"],
  combining: ["e\u0301", "A\u030A", "n\u0303", "\u1100\u1161\u11A8", "o\u0308\u0301", "\u0915\u093C", "Å", "Ω",
    "a\u0323\u0302", "\u0041\u030A\u0301", "q\u0307\u0323", "\u2126", "\u212B"],
  space: [" ", "  ", "   ", "\t", "\t\t", " \t ", "\r", "\r ", "\u00A0", "\u3000", "\u2003", "\u2009", "\u200B",
    "\uFEFF", "\u0085", "\u2028", "\u202F", "\u000B", "\u000C", "\u1680"],
  punct: [".", ",", "!", "?", "...", "--", "—", "'", "\"", "''", "'s", "'S", "'ll", "'LL", "'Re", "'ve", "'d", "'m",
    "'t", "'x", "''s", ":", ";", "-", "_", "/", "\\", "@", "#", "«", "»", "¿", "¡", "…", "·"],
};
const KINDS = Object.keys(FRAGMENTS);

const handLines = [
  "",
  " ",
  "  leading spaces and trailing  ",
  "tab\tseparated\tvalues\t",
  "many     spaces      between",
  "CRLF line\r",
  "\r\r\r",
  "Hello world",
  "hello WORLD HeLLo",
  "it's IT'S It'S you're YOU'RE we've WE'VE I'm I'M she'll SHE'LL he'd HE'D don't DON'T",
  "'s 's 'S 'll 'LL ' s",
  "12345678901234567890123456789012345678901234567890",
  "3.14 -2 +7 1e10 0x1F 007",
  "<|im_start|>user\nDescribe<|im_end|>",
  "<|im_start|>user<|vision_start|><|image_pad|><|vision_end|>Describe the image 123.<|im_end|>",
  "<|im_start|>assistant A cat on a mat.<|im_end|>",
  SPECIAL.join(""),
  SPECIAL.join(" "),
  SPECIAL.map((s) => "x" + s + "y").join(""),
  "<|im_start|<|im_start|>|><|im_end",
  "<|image_pad|><|image_pad|><|image_pad|><|image_pad|>",
  "<think>\nreasoning\n</think>",
  "<|endoftext|",
  "<|IM_START|>",
  "naïve café résumé (precomposed) vs nai\u0308ve cafe\u0301 re\u0301sume\u0301 (decomposed)",
  "\u1100\u1161\u11A8\u1100\u1161 jamo compose",
  "Å Å Å",
  "👨‍👩‍👧‍👦👨‍👩‍👧‍👦 family",
  "skin 👍🏻👍🏼👍🏽👍🏾👍🏿",
  "flags 🇫🇷🇩🇪🇯🇵",
  "    def indented(self):\n",
  "\t\t\ttabs then text",
  "trailing tabs\t\t\t",
  "spaces before newline-like \u2028 and \u2029 separators",
  "bom \uFEFF inside \uFEFFtext",
  "nel \u0085 char",
  "nbsp\u00A0between\u00A0words",
  "ideographic\u3000space",
  "zero\u200Bwidth",
  "a".repeat(300),
  " ".repeat(300) + "x",
  "ab".repeat(400),
  "😀".repeat(100),
  "1".repeat(200),
  "中文".repeat(150),
  "\u0000nul byte",
  "del \u007F and c1 \u0080\u009F controls",
  "private \uE000 use and \uFFFF noncharacter",
  "astral 𝟘𝟙𝟚 𐍈 𠀀",
  "mixed: English 中文 日本語 한국어 العربية हिन्दी русский 😀 123",
  "ſ long s 'ſ and K kelvin 'K",
  "\uFEFFbom at the start of a line",
  "Unicode 15: Kawi \u{11F04}\u{11F05} CJK-H \u{31350} Cyrillic \u{1E030} new",
  "word\u2060joiner soft\u00ADhyphen LRM\u200Emark",
  "   <|im_start|>   <|im_end|>   ",
  "\t<|endoftext|>\t",
  "dollar$100 and 100$ and #hashtag and @mention",
  "ÀÉÎÕÜ àéîõü ÇçÑñ",
  "x\u0301\u0301\u0301 stacked marks",
  "nul\u0000\u00E9 e\u0301\u0000x (NUL inside text that NFC changes)",
];

// Invalid UTF-8, written as raw bytes: lone continuation, truncated sequences,
// overlong, surrogate, above U+10FFFF, 0xFF.
const badLines = [
  Buffer.from([0x61, 0x80, 0x62]),
  Buffer.from([0xc3]),
  Buffer.from([0x68, 0x69, 0xe2, 0x82]),
  Buffer.from([0xe2, 0x82, 0x20, 0xe2, 0x82, 0xac]),
  Buffer.from([0xc0, 0xaf, 0x2f]),
  Buffer.from([0xed, 0xa0, 0x80, 0x78]),
  Buffer.from([0xf4, 0x90, 0x80, 0x80]),
  Buffer.from([0xff, 0xfe, 0x41]),
  Buffer.from([0xf0, 0x9f, 0x98, 0x20, 0x61]),
  Buffer.concat([Buffer.from("<|im_start|>"), Buffer.from([0x80]), Buffer.from("<|im_end|>")]),
  Buffer.concat([Buffer.from("caf"), Buffer.from([0xe9]), Buffer.from(" au lait")]),
];

function randomLine() {
  const parts = [];
  const n = int(1, 12);
  for (let i = 0; i < n; i++) {
    const r = rand();
    if (r < 0.06) parts.push(pick(SPECIAL));
    else if (r < 0.2) parts.push(pick(FRAGMENTS.space));
    else if (r < 0.3) parts.push(pick(FRAGMENTS.punct));
    else if (r < 0.36) parts.push(String(int(0, 10 ** int(1, 9))));
    else parts.push(pick(FRAGMENTS[pick(KINDS)]));
    if (rand() < 0.5) parts.push(pick([" ", " ", " ", "", "  ", "\t"]));
  }
  let s = parts.join("");
  if (rand() < 0.1) s = s.toUpperCase();
  if (rand() < 0.05) s = s.toLowerCase();
  return s.replace(/\n/g, " ");
}

const chunks = [];
for (const l of handLines) chunks.push(Buffer.from(l.replace(/\n/g, " "), "utf8"));
for (const b of badLines) chunks.push(b);
for (let i = 0; i < N; i++) chunks.push(Buffer.from(randomLine(), "utf8"));
process.stdout.write(Buffer.concat(chunks.flatMap((c) => [c, Buffer.from("\n")])));
