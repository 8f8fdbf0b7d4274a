/* dataset.c - reading and validating conversation datasets (see dataset.h). */
#include "data/dataset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strbuf.h"

const char *tdm_role_name(tdm_role r) {
    return r == TDM_ROLE_SYSTEM ? "system" : r == TDM_ROLE_USER ? "user" : "assistant";
}

static void sample_free(tdm_sample *s) {
    for (int i = 0; i < s->n_turns; i++) free(s->turns[i].text);
    for (int i = 0; i < s->n_images; i++) free(s->images[i]);
    free(s->turns);
    free(s->images);
    memset(s, 0, sizeof *s);
}

void tdm_dataset_free(tdm_dataset *d) {
    if (!d) return;
    for (int64_t i = 0; i < d->n_samples; i++) sample_free(&d->samples[i]);
    for (int i = 0; i < d->n_files; i++) free(d->files[i]);
    free(d->samples);
    free(d->files);
    free(d);
}

const char *tdm_dataset_where(const tdm_dataset *d, int64_t i, char *buf, int cap) {
    const tdm_sample *s = &d->samples[i];
    snprintf(buf, (size_t)cap, "%s: sample %lld (line %d)", d->files[s->file], (long long)s->index, s->line);
    return buf;
}

static int parse_role(const char *r, tdm_role *out) {
    if (!strcmp(r, "system")) *out = TDM_ROLE_SYSTEM;
    else if (!strcmp(r, "user") || !strcmp(r, "human")) *out = TDM_ROLE_USER;
    else if (!strcmp(r, "assistant") || !strcmp(r, "gpt")) *out = TDM_ROLE_ASSISTANT;
    else return -1;
    return 0;
}

static int count_tags(const char *s) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, "<image>")) != NULL; p += 7) n++;
    return n;
}

/* The placeholder in s of a medium tandem does not train ("<video>", "<audio>"), or NULL. */
static const char *other_media_tag(const char *s) {
    static const char *const tags[] = {"<video>", "<audio>"};
    for (size_t i = 0; i < sizeof tags / sizeof *tags; i++)
        if (strstr(s, tags[i])) return tags[i];
    return NULL;
}

static int is_blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\n' && *s != '\t' && *s != '\r') return 0;
    return 1;
}

/* The file names of image parts written inline ({"type": "image", "image": "a.png"}, as in
 * Hugging Face's chat messages), in conversation order. */
typedef struct inline_images {
    const tdm_json **v;
    size_t n, cap;
} inline_images;

/* Message content: a string, or a list of {"type": "text", "text"} / {"type": "image"} parts
 * (turned into text with "<image>" tags; an image part's "image", "path" or "url" is added to *inl).
 * Returns a malloc'ed string or NULL. */
static char *content_text(const tdm_json *c, inline_images *inl, tdm_error *err) {
    if (c && c->type == TDM_JSON_STRING) {
        if (strlen(c->str) != c->len) {
            tdm_errorf(err, "content holds a NUL character");
            return NULL;
        }
        return tdm_xstrdup(c->str);
    }
    if (!c || c->type != TDM_JSON_ARRAY) {
        tdm_errorf(err, "content must be a string or a list of parts");
        return NULL;
    }
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_sb_puts(&sb, "");
    for (size_t i = 0; i < c->len; i++) {
        const tdm_json *part = c->items[i];
        const tdm_json *type = tdm_json_get(part, "type");
        if (!type || type->type != TDM_JSON_STRING) {
            tdm_sb_free(&sb);
            tdm_errorf(err, "content part %zu has no \"type\"", i);
            return NULL;
        }
        if (!strcmp(type->str, "image")) {
            /* Hugging Face's processors take the picture from "image", "path" or "url" */
            static const char *const keys[] = {"image", "path", "url"};
            const tdm_json *path = NULL;
            size_t k = 0;
            while (k < sizeof keys / sizeof *keys && !(path = tdm_json_get(part, keys[k]))) k++;
            if (path && (path->type != TDM_JSON_STRING || path->len == 0 || strlen(path->str) != path->len)) {
                tdm_sb_free(&sb);
                tdm_errorf(err, "content part %zu: \"%s\" must be a file path string", i, keys[k]);
                return NULL;
            }
            if (path) {
                if (inl->n == inl->cap) {
                    inl->cap = inl->cap ? 2 * inl->cap : 4;
                    inl->v = tdm_xrealloc(inl->v, inl->cap * sizeof *inl->v);
                }
                inl->v[inl->n++] = path;
            }
            tdm_sb_puts(&sb, "<image>");
        } else if (!strcmp(type->str, "text")) {
            const tdm_json *t = tdm_json_get(part, "text");
            if (!t || t->type != TDM_JSON_STRING || strlen(t->str) != t->len) {
                tdm_sb_free(&sb);
                tdm_errorf(err, "content part %zu: \"text\" must be a string", i);
                return NULL;
            }
            tdm_sb_puts(&sb, t->str);
        } else {
            tdm_sb_free(&sb);
            tdm_errorf(err, "content part %zu: unknown type \"%s\"", i, type->str);
            return NULL;
        }
    }
    return sb.data;
}

/* Longer than most: every rule of a sample (turns, tags, images, what is refused) is checked in
 * one pass, each with its own message, and all share one cleanup.
 * Fills s from one sample object; on error s is freed and err says why (no prefix). */
static int parse_sample(const tdm_json *o, const char *root, int image_root_given, int check_images, tdm_sample *s,
                        tdm_error *err) {
    memset(s, 0, sizeof *s);
    if (!o || o->type != TDM_JSON_OBJECT) return tdm_errorf(err, "expected an object");
    const tdm_json *msgs = tdm_json_get(o, "messages");
    const char *rk = "role", *ck = "content", *alt_rk = "from", *alt_ck = "value";
    if (!msgs) {
        msgs = tdm_json_get(o, "conversations");
        rk = "from", ck = "value", alt_rk = "role", alt_ck = "content";
    }
    if (!msgs || msgs->type != TDM_JSON_ARRAY)
        return tdm_errorf(err, "expected a \"messages\" or \"conversations\" list");
    /* LLaMA-Factory writes a "tools" column into the system prompt; dropping it would train another text */
    const tdm_json *tools = tdm_json_get(o, "tools");
    if (tools && tools->type != TDM_JSON_NULL &&
        !((tools->type == TDM_JSON_STRING || tools->type == TDM_JSON_ARRAY || tools->type == TDM_JSON_OBJECT) &&
          tools->len == 0))
        return tdm_errorf(err, "\"tools\": tool definitions are not supported (LLaMA-Factory would write them into "
                               "the system prompt)");
    const tdm_json *sys = tdm_json_get(o, "system"); /* LLaMA-Factory's optional system column */
    if (sys && sys->type != TDM_JSON_STRING && sys->type != TDM_JSON_NULL)
        return tdm_errorf(err, "\"system\" must be a string (the system prompt)");
    if (sys && sys->type == TDM_JSON_STRING && strlen(sys->str) != sys->len)
        return tdm_errorf(err, "\"system\" holds a NUL character");
    int has_sys = sys && sys->type == TDM_JSON_STRING && sys->len > 0;
    inline_images inl = {0};
    s->turns = tdm_xcalloc(msgs->len + 1, sizeof(tdm_turn));
    if (has_sys) s->turns[s->n_turns++] = (tdm_turn){TDM_ROLE_SYSTEM, tdm_xstrdup(sys->str)};
    int tags = has_sys ? count_tags(sys->str) : 0;                  /* counted as in a system message */
    const char *media = has_sys ? other_media_tag(sys->str) : NULL; /* the first <video>/<audio> tag */
    const char *media_in = "the \"system\" field";
    char media_msg[32];
    for (size_t i = 0; i < msgs->len; i++) {
        const tdm_json *m = msgs->items[i];
        /* the other layout's keys ("conversations" of role/content, "messages" of from/value), which
         * LLaMA-Factory's role_tag/content_tag settings allow */
        const char *mrk = rk, *mck = ck;
        if (!tdm_json_get(m, rk) && tdm_json_get(m, alt_rk)) mrk = alt_rk, mck = alt_ck;
        const tdm_json *r = tdm_json_get(m, mrk);
        if (!r || r->type != TDM_JSON_STRING) {
            tdm_errorf(err, "message %zu has no \"%s\" string", i, mrk);
            goto fail;
        }
        tdm_role role;
        if (parse_role(r->str, &role) != 0) {
            tdm_errorf(err, "message %zu: unknown role \"%s\" (expected system, user or assistant)", i, r->str);
            goto fail;
        }
        const tdm_json *calls = tdm_json_get(m, "tool_calls"); /* OpenAI's; its content is often null */
        if (calls && calls->type != TDM_JSON_NULL && !(calls->type == TDM_JSON_ARRAY && calls->len == 0)) {
            tdm_errorf(err, "message %zu: \"tool_calls\" are not supported (no tool template)", i);
            goto fail;
        }
        char *text = content_text(tdm_json_get(m, mck), &inl, err);
        if (!text) {
            tdm_error_prefix(err, "message %zu", i);
            goto fail;
        }
        s->turns[s->n_turns++] = (tdm_turn){role, text};
        /* order: [system] user assistant user assistant ... */
        int k = s->n_turns - 1;
        int first = s->turns[0].role == TDM_ROLE_SYSTEM ? 1 : 0;
        tdm_role want = k < first ? TDM_ROLE_SYSTEM : ((k - first) % 2 == 0 ? TDM_ROLE_USER : TDM_ROLE_ASSISTANT);
        if (role != want && role == TDM_ROLE_SYSTEM && has_sys && i == 0) {
            tdm_errorf(err, "message 0: a system message, but the sample's \"system\" field already gives the "
                            "system prompt (give it once)");
            goto fail;
        }
        if (role != want) {
            tdm_errorf(err,
                       "message %zu: expected role %s, got %s (turns are: optional system, then user and "
                       "assistant alternating)",
                       i, tdm_role_name(want), r->str);
            goto fail;
        }
        int n = count_tags(text);
        if (role == TDM_ROLE_ASSISTANT && n > 0) {
            tdm_errorf(err, "message %zu: an assistant answer cannot hold <image>", i);
            goto fail;
        }
        if (role == TDM_ROLE_ASSISTANT && is_blank(text)) {
            tdm_errorf(err, "message %zu: empty assistant answer", i);
            goto fail;
        }
        tags += n;
        if (!media && (media = other_media_tag(text)) != NULL) {
            snprintf(media_msg, sizeof media_msg, "message %zu", i);
            media_in = media_msg;
        }
    }
    if (s->n_turns == 0 || s->turns[s->n_turns - 1].role != TDM_ROLE_ASSISTANT) {
        tdm_errorf(err, "the conversation must end with an assistant answer");
        goto fail;
    }
    const tdm_json *imgs = tdm_json_get(o, "images");
    if (!imgs) imgs = tdm_json_get(o, "image");
    size_t n_img = 0;
    if (imgs && imgs->type == TDM_JSON_STRING) n_img = 1;
    else if (imgs && imgs->type == TDM_JSON_ARRAY) n_img = imgs->len;
    else if (imgs && imgs->type != TDM_JSON_NULL) {
        tdm_errorf(err, "\"images\" must be a list of paths");
        goto fail;
    }
    /* Qwen3-VL's video path (frames, temporal patches, <|video_pad|>) is not implemented: a video
     * must not turn into its "<video>" tag trained as plain text */
    const tdm_json *vids = tdm_json_get(o, "videos");
    if (!vids) vids = tdm_json_get(o, "video");
    if (vids && vids->type != TDM_JSON_NULL && !(vids->type == TDM_JSON_ARRAY && vids->len == 0)) {
        tdm_errorf(err, "\"%s\": video samples are not supported (images only)",
                   tdm_json_get(o, "videos") ? "videos" : "video");
        goto fail;
    }
    /* a tag with no video list: LLaMA-Factory refuses its count mismatch; here it would be trained as text */
    if (media) {
        tdm_errorf(err, "%s: a %s tag, but video and audio samples are not supported (images only)", media_in, media);
        goto fail;
    }
    if (inl.n > 0 && !imgs) { /* the pictures named only in the content parts */
        n_img = inl.n;
    } else if (inl.n > 0) { /* named twice: the two lists must agree, or which one trains is a guess */
        for (size_t i = 0; i < inl.n && i < n_img; i++) {
            const tdm_json *p = imgs->type == TDM_JSON_STRING ? imgs : imgs->items[i];
            if (p->type == TDM_JSON_STRING && strcmp(p->str, inl.v[i]->str) != 0) {
                tdm_errorf(err,
                           "image %zu is \"%s\" in a content part but \"%s\" in \"images\" (give the "
                           "files in one place, or the same in both)",
                           i, inl.v[i]->str, p->str);
                goto fail;
            }
        }
        if (inl.n != n_img) {
            tdm_errorf(err, "%zu image parts name a file but %zu images listed", inl.n, n_img);
            goto fail;
        }
    }
    if ((size_t)tags != n_img) {
        tdm_errorf(err, "%d <image> tags but %zu images %s", tags, n_img, imgs ? "listed" : "named in content parts");
        goto fail;
    }
    if (n_img > TDM_DATASET_MAX_IMAGES_PER_SAMPLE) {
        tdm_errorf(err, "%zu images, more than the limit of %d", n_img, TDM_DATASET_MAX_IMAGES_PER_SAMPLE);
        goto fail;
    }
    s->images = tdm_xcalloc(n_img ? n_img : 1, sizeof(char *));
    for (size_t i = 0; i < n_img; i++) {
        const tdm_json *p = !imgs ? inl.v[i] : imgs->type == TDM_JSON_STRING ? imgs : imgs->items[i];
        if (p->type != TDM_JSON_STRING || p->len == 0) {
            tdm_errorf(err, "image %zu: expected a path string", i);
            goto fail;
        }
        /* the file opened would be the path cut at the NUL: another file than the one named */
        if (strlen(p->str) != p->len) {
            tdm_errorf(err, "image %zu in \"images\": the path holds a NUL character (\\u0000), which no file name can",
                       i);
            goto fail;
        }
        if (!strncmp(p->str, "http://", 7) || !strncmp(p->str, "https://", 8) || !strncmp(p->str, "data:", 5)) {
            tdm_errorf(err,
                       "image %zu: \"%.100s\" is a URL, but tandem reads local files only (download it and "
                       "give its path)",
                       i, p->str);
            goto fail;
        }
        tdm_strbuf sb;
        tdm_sb_init(&sb);
        if (p->str[0] != '/') tdm_sb_printf(&sb, "%s/", root);
        tdm_sb_puts(&sb, p->str);
        s->images[s->n_images++] = sb.data;
        if (check_images && access(sb.data, R_OK) != 0) {
            int e = errno;
            /* LLaMA-Factory falls back to the path as written (from the working directory) when
             * media_dir does not hold it; here the root is fixed, so say which root and how to move it.
             * Where the path is there but unreadable (a symlink loop, no permission) the system's reason
             * is the one to give. */
            if (e != ENOENT && e != ENOTDIR) tdm_errorf(err, "image %zu: cannot read %s: %s", i, sb.data, strerror(e));
            else if (p->str[0] != '/' && access(p->str, R_OK) == 0)
                tdm_errorf(err,
                           "image %zu: cannot read %s (relative paths resolve against %s; %s is there "
                           "from the working directory: pass --image-root .)",
                           i, sb.data, image_root_given ? "--image-root" : "the dataset file's folder", p->str);
            else
                tdm_errorf(err, "image %zu: cannot read %s (relative paths resolve against %s)", i, sb.data,
                           image_root_given ? "--image-root" : "the dataset file's folder, or --image-root");
            goto fail;
        }
    }
    free(inl.v);
    return 0;
fail:
    free(inl.v);
    sample_free(s);
    return -1;
}

static int add_sample(tdm_dataset *d, int64_t *cap, const tdm_json *o, int file, int64_t index, int line,
                      const char *root, const tdm_dataset_options *opt, tdm_error *err) {
    tdm_sample s;
    tdm_error e;
    if (parse_sample(o, root, opt->image_root != NULL, !opt->no_image_check, &s, &e) != 0) {
        char where[1200];
        snprintf(where, sizeof where, "%s: sample %lld (line %d): %s", d->files[file], (long long)index, line, e.msg);
        if (!opt->skip_bad_samples) return tdm_errorf(err, "%s", where);
        if (d->n_skipped++ == 0) {
            snprintf(d->first_skip, sizeof d->first_skip, "%.1000s", where);
            d->first_skip_file = file, d->first_skip_index = index;
        }
        return 0;
    }
    s.file = file;
    s.index = index;
    s.line = line;
    if (d->n_samples == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        d->samples = tdm_xrealloc(d->samples, sizeof(tdm_sample) * (size_t)*cap);
    }
    d->samples[d->n_samples++] = s;
    return 0;
}

/* JSON's blanks; not NUL (strchr(" \t\r\n", c) matches its terminator: a file of zero bytes
 * read as empty, no sample and no word) */
static int is_json_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The samples of one file's text (mapped: see load_file). */
static int parse_file(tdm_dataset *d, int64_t *cap, int file, const char *text, size_t len, const char *root,
                      const tdm_dataset_options *opt, tdm_error *err) {
    const char *path = d->files[file];
    const size_t bom = len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3) ? 3 : 0; /* a UTF-8 byte order mark */
    size_t first = bom;
    while (first < len && is_json_blank(text[first])) first++;
    size_t plen = strlen(path);
    int suffix_jsonl = plen > 6 && !strcmp(path + plen - 6, ".jsonl");
    int jsonl = suffix_jsonl || first == len || text[first] != '['; /* an empty file: no lines, no sample */
    int rc = 0;
    tdm_json_doc *whole = NULL;
    if (jsonl && !suffix_jsonl) {
        /* One object spread over several lines is one sample, not JSON Lines whose first line
         * breaks off; real JSON Lines fail this parse at their second line. */
        tdm_error ignored;
        whole = tdm_json_parse(text, len, path, &ignored);
        if (whole && tdm_json_root(whole)->type != TDM_JSON_OBJECT) {
            tdm_json_free(whole);
            whole = NULL;
        }
    }
    if (whole) {
        rc = add_sample(d, cap, tdm_json_root(whole), file, 0, tdm_json_root(whole)->line, root, opt, err);
        tdm_json_free(whole);
    } else if (!jsonl) {
        /* a JSON array, one element at a time: a large file never holds more than one
         * sample's tree (positions and messages as parsing it whole) */
        tdm_json_array_reader rd;
        tdm_json_doc *doc;
        int got;
        rc = tdm_json_array_begin(&rd, text, len, path, err);
        for (int64_t i = 0; rc == 0 && (got = tdm_json_array_next(&rd, &doc, err)) != 0; i++) {
            if (got < 0) {
                rc = -1;
                break;
            }
            rc = add_sample(d, cap, tdm_json_root(doc), file, i, tdm_json_root(doc)->line, root, opt, err);
            tdm_json_free(doc);
        }
    } else {
        /* JSON Lines: the sample index is the index among non-blank lines; messages also give the line */
        int64_t index = 0;
        int line = 1;
        for (size_t pos = bom; pos < len && rc == 0; line++) { /* a line holding only the mark is blank */
            size_t end = pos;
            while (end < len && text[end] != '\n') end++;
            size_t b = pos;
            while (b < end && is_json_blank(text[b])) b++;
            if (b < end) {
                char name[1100];
                snprintf(name, sizeof name, "%s line %d", path, line);
                tdm_error e;
                tdm_json_doc *doc = tdm_json_parse(text + pos, end - pos, name, &e);
                if (!doc) {
                    if (!opt->skip_bad_samples) {
                        rc = tdm_errorf(err, "%s", e.msg);
                    } else if (d->n_skipped++ == 0) {
                        snprintf(d->first_skip, sizeof d->first_skip, "%s", e.msg);
                        d->first_skip_file = file, d->first_skip_index = index;
                    }
                } else {
                    rc = add_sample(d, cap, tdm_json_root(doc), file, index, line, root, opt, err);
                    tdm_json_free(doc);
                }
                index++;
            }
            pos = end + 1;
        }
    }
    return rc;
}

static int load_file(tdm_dataset *d, int64_t *cap, int file, const tdm_dataset_options *opt, tdm_error *err) {
    const char *path = d->files[file];
    char root[1024];
    if (opt->image_root) snprintf(root, sizeof root, "%s", opt->image_root);
    else tdm_dirname(path, root, sizeof root);
    size_t len;
    const char *text = tdm_map_file(path, TDM_DATASET_MAX_FILE_BYTES, &len, err);
    if (!text) return -1;
    /* Another program cutting the file short while it is parsed would otherwise kill the run
     * with SIGBUS; the guard makes it this error (what was parsed of the file is dropped with
     * the dataset: the run ends). */
    tdm_map_guard g;
    tdm_map_guard_arm(&g, text, len);
    if (sigsetjmp(g.jb, 1) != 0) {
        tdm_unmap_file(text, len);
        return tdm_errorf(err,
                          "%s: the file shrank below its %zu bytes while it was read (another program is "
                          "writing it?): load it once it is complete",
                          path, len);
    }
    int rc = parse_file(d, cap, file, text, len, root, opt, err);
    tdm_map_guard_leave(&g);
    tdm_unmap_file(text, len);
    return rc;
}

tdm_dataset *tdm_dataset_load(const char *const *paths, int n_paths, const tdm_dataset_options *opt, tdm_error *err) {
    tdm_dataset_options defaults = {0};
    if (!opt) opt = &defaults;
    if (n_paths < 1) {
        tdm_errorf(err, "no dataset file given");
        return NULL;
    }
    tdm_dataset *d = tdm_xcalloc(1, sizeof *d);
    d->files = tdm_xcalloc((size_t)n_paths, sizeof(char *));
    d->n_files = n_paths;
    for (int i = 0; i < n_paths; i++) d->files[i] = tdm_xstrdup(paths[i]);
    int64_t cap = 0;
    for (int i = 0; i < n_paths; i++) {
        if (load_file(d, &cap, i, opt, err) != 0) {
            tdm_dataset_free(d);
            return NULL;
        }
    }
    return d;
}
