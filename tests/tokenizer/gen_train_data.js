// gen_train_data.js - writes the small dataset the train-tokenizer tests use
// (tests/tokenizer/train_sample.json, LLaVA "messages" style, plus a few ShareGPT
// "conversations" samples). Deterministic; rerun only to change the sample:
//   node tests/tokenizer/gen_train_data.js > tests/tokenizer/train_sample.json
"use strict";
let seed = 12345;
function rand() {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const colors = ["red", "green", "blue", "yellow", "purple", "orange", "black", "white", "gray", "pink", "brown", "cyan"];
const shapes = ["circle", "square", "triangle", "star", "hexagon", "rectangle", "diamond", "ellipse", "cross", "arrow"];
const places = ["top left", "top right", "bottom left", "bottom right", "center", "middle", "upper half", "lower half"];
const sizes = ["small", "large", "tiny", "huge", "medium-sized"];
const questions = ["Describe the image.", "What shape is in the picture?", "What color is the shape?",
  "How many shapes are there?", "Where is the shape located?", "Is there a circle in the image?",
  "What's in the picture? Answer briefly.", "Can you count the objects?", "Which shape is the largest?"];
const extra = ["图片中有一个红色的圆形。", "画像には青い四角形があります。", "이미지에 노란 별이 있습니다.",
  "На картинке зелёный треугольник.", "الصورة تحتوي على دائرة.", "चित्र में एक तारा है।",
  "The answer is 42.", "It's about 3.5 cm wide; they're evenly spaced.", "def count(xs):\n    return len(xs)\n",
  "Résumé: naïve café, Zürich, Ångström.", "Emoji 😀👍🏽 are fun!"];
const words = ("about above across after again against almost alone along already also although always among " +
  "another answer anyone anything appear around ask background banana basket beautiful because become before " +
  "begin behind believe below beside between beyond bicycle bird border bottle bright building butterfly " +
  "camera candle careful carry castle cloud coffee collect complete consider contain corner count cover " +
  "crowd curve dark decide different difficult direction distance drawing during each early edge either " +
  "empty enough entire equal evening every example explain family feather field figure finally flower follow " +
  "forest frame garden gentle glass golden ground guitar half happen heavy height hidden history honest horizon " +
  "however hundred identify image include inside instead island journey kitchen knowledge ladder language " +
  "largest later layer leaf letter light little location mountain narrow nature nearby neither number ocean " +
  "opposite outline overlap painting pattern pencil people perhaps picture planet pocket position possible " +
  "probably question quickly rather reason rectangle region remember repeat river rotate scene second shadow " +
  "similar simple smaller smooth someone something spiral square stripe student surface symbol texture " +
  "thousand through together toward tower transparent tree twelve under unusual usually valley various " +
  "vertical visible window winter without wonder yellow zebra").split(" ");
const samples = [];
for (let i = 0; i < 240; i++) {
  const n = 1 + Math.floor(rand() * 3);
  const objs = [];
  for (let k = 0; k < n; k++) objs.push(`a ${pick(sizes)} ${pick(colors)} ${pick(shapes)} in the ${pick(places)}`);
  const answer = `There ${n === 1 ? "is" : "are"} ${n} shape${n === 1 ? "" : "s"}: ${objs.join(", ")}.` +
    (rand() < 0.3 ? " " + pick(extra) : "");
  let q = pick(questions);
  if (rand() < 0.5) {
    const ws = [];
    for (let k = 0; k < 6 + Math.floor(rand() * 10); k++) ws.push(pick(words));
    q += " " + ws.join(" ") + (rand() < 0.5 ? "?" : ".");
  }
  if (i % 8 === 7) {
    samples.push({ id: `s${i}`, image: `images/${i}.png`,
      conversations: [{ from: "human", value: `<image>\n${q}` }, { from: "gpt", value: answer }] });
  } else {
    samples.push({ id: `s${i}`, images: [`images/${i}.png`],
      messages: [{ role: "user", content: `<image>${q}` }, { role: "assistant", content: answer }],
      meta: { content: "not inside messages: never trained on" } });
  }
}
process.stdout.write(JSON.stringify(samples, null, 1) + "\n");
