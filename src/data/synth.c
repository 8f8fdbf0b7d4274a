/* synth.c - the synthetic shapes dataset (see synth.h). */
#include "data/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/fs.h"
#include "core/rng.h"
#include "core/strbuf.h"
#include "data/image.h"

/* Sized for a tiny vision tower trained from scratch (patch 16, merge 2): the default 64x64
 * picture is 2x2 merged visual tokens, one per grid cell, and each shape fills most of its
 * cell, so every question is answered by one token's content (shapes a few pixels wide at
 * random places in a 3x3 grid stayed at the answer prior; docs/learning.md). */
enum { N_SHAPES = 4, N_COLOURS = 5, N_CELLS = 4, MAX_ITEMS = 4 };
static const char *shape_name[N_SHAPES] = {"circle", "square", "triangle", "cross"};
static const char *shape_plural[N_SHAPES] = {"circles", "squares", "triangles", "crosses"};
static const char *colour_name[N_COLOURS] = {"red", "green", "blue", "yellow", "purple"};
static const uint8_t colour_rgb[N_COLOURS][3] = {
    {225, 30, 30}, {30, 170, 50}, {30, 70, 230}, {240, 210, 20}, {150, 50, 190}};
static const char *cell_name[N_CELLS] = {"top left", "top right", "bottom left", "bottom right"};
static const char *count_word[5] = {"no", "a", "two", "three", "four"};

#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))
/* Several wordings per question, so the model (and the tokenizer trained on this text)
 * sees varied language; every wording has the same single exact answer. */
static const char *q_caption[] = {"Describe the image.", "What do you see in the picture?",
                                  "Give a short description of this image.", "List the shapes in the picture.",
                                  "Which shapes are drawn here?"};
static const char *q_count_all[] = {"How many shapes are there?", "How many shapes can you see?",
                                    "Count the shapes in the picture.", "What is the number of shapes in this image?",
                                    "How many objects are drawn?"};
static const char *q_count_kind[] = {"How many %s are there?", "How many %s can you count?", "Count the %s.",
                                     "What is the number of %s in the picture?"};
static const char *q_colour[] = {"What colour is the %s?", "Which colour does the %s have?",
                                 "Tell me the colour of the %s.", "The %s is painted in which colour?"};
static const char *q_colour_plural[] = {"What colour are the %s?", "Which colour do the %s have?",
                                        "Tell me the colour of the %s.", "The %s are painted in which colour?"};
static const char *q_where[] = {"Where is the %s?", "In which part of the picture is the %s?",
                                "Where can the %s be found?", "Whereabouts is the %s located?"};
/* every wording says "shape" and none says "where", "in which" or "position", so
 * tandem evaluate files them under shape */
static const char *q_shape[] = {"Which shape is in the %s?", "What shape can you see in the %s?",
                                "Name the shape in the %s.", "What kind of shape is drawn in the %s?"};
static const char *systems[] = {"You are a helpful assistant that answers questions about pictures.",
                                "You are a careful observer. Answer briefly and precisely.",
                                "Look at the image and reply with a short answer.",
                                "You describe simple geometric drawings for children."};
static const char *text_only[][2] = {
    {"How many sides does a triangle have?", "3"},
    {"How many sides does a square have?", "4"},
    {"How many corners does a rectangle have?", "4"},
    {"How many arms does a cross have?", "4"},
    {"Which shape has no corners: a circle, a square or a triangle?", "circle"},
    {"Which shape looks like a wheel or a coin?", "circle"},
    {"Which shape looks like a plus sign?", "cross"},
    {"Which shape has three corners?", "triangle"},
    {"What colour do you get when you mix blue and yellow?", "green"},
    {"What colour do you get when you mix red and yellow?", "orange"},
    {"What colour do you get when you mix red and blue?", "purple"},
    {"What colour do you get when you mix red and white?", "pink"},
    {"What colour is a ripe banana?", "yellow"},
    {"What colour is fresh grass in spring?", "green"},
    {"What colour is the sky on a clear summer afternoon?", "blue"},
    {"What colour are strawberries and tomatoes?", "red"},
    {"What colour is chocolate or tree bark?", "brown"},
    {"What colour is a pumpkin?", "orange"},
    {"Which colour do flamingos usually have?", "pink"},
    {"Which colour is made of red and blue, like lavender or grapes?", "purple"},
    {"Name the four shapes you know.", "circle, square, triangle and cross"},
    {"Name the five colours you know.", "red, green, blue, yellow and purple"},
    {"What is two plus two?", "4"},
    {"What is one plus two?", "3"},
    {"Is a square a kind of rectangle?", "yes"},
    {"Can a triangle have four sides?", "no"},
    {"Which word describes the middle of a picture?", "center"},
    {"What is the opposite of top left?", "bottom right"},
    {"What is the opposite of left?", "right"},
    {"Which is bigger, a mountain or a pebble?", "mountain"},
    {"Which animal says moo and gives milk?", "cow"},
    {"Which planet do we live on?", "Earth"},
    {"Which season comes after winter?", "spring"},
    {"Which month follows January?", "February"},
    {"How many days are there in a week?", "7"},
    {"How many legs does a spider have?", "8"},
    {"What do bees make from flower nectar?", "honey"},
    {"Which instrument has black and white keys?", "piano"},
    {"Where do penguins mostly live?", "Antarctica"},
    {"What melts when the weather gets warm: snow or stone?", "snow"},
    {"Which fruit keeps the doctor away, according to the proverb?", "apple"},
    {"What do caterpillars become?", "butterflies"},
    {"Which vehicle flies through the clouds?", "airplane"},
    {"Which bird hoots at night?", "owl"},
    {"What do you call frozen water?", "ice"},
    {"Which gas do plants absorb from the air?", "carbon dioxide"},
    {"Which direction does the sun rise in?", "east"},
    {"What is the capital of France?", "Paris"},
    {"Which ocean is the largest?", "Pacific"},
    {"What do we use to write on a blackboard?", "chalk"},
    {"Which language is spoken in Brazil?", "Portuguese"},
    {"What is the boiling point of water in degrees Celsius?", "100"},
    {"Which metal is attracted by a magnet?", "iron"},
    {"How many wheels does a bicycle have?", "2"},
    {"Which organ pumps blood through the body?", "heart"},
    {"What do you wear on your feet?", "shoes"},
    {"Which tool do you use to cut paper?", "scissors"},
    {"What falls from clouds during a thunderstorm?", "rain"},
    {"Which musical note comes after do, re?", "mi"},
    {"Which dessert is cold, sweet and often served in a cone?", "ice cream"},
    {"What do you call a baby dog?", "puppy"},
    {"What do you call a baby cat?", "kitten"},
    {"Which shape do stop signs have in many countries?", "octagon"},
    {"How many minutes make an hour?", "60"},
    {"Which is heavier, a kilogram of feathers or a kilogram of bricks?", "neither"},
};

/* A random stream per sample: draw k of sample i is a pure function of (seed, stream, k). */
typedef struct draw {
    uint64_t seed, stream, k;
} draw;

static int pick(draw *d, int n) { return (int)(tdm_rng_u64(d->seed, d->stream, d->k++) % (uint64_t)n); }

typedef struct item {
    int shape, colour, cell;
} item;

typedef struct picture {
    int w, h, n;
    item it[MAX_ITEMS];
} picture;

static void render(const picture *p, draw *d, uint8_t *rgb) {
    for (int i = 0; i < p->w * p->h * 3; i++) rgb[i] = 255;
    int cw = p->w / 2, ch = p->h / 2;
    for (int s = 0; s < p->n; s++) {
        const item *it = &p->it[s];
        int cell_min = cw < ch ? cw : ch;
        /* half-size in [0.36, 0.46] of the cell's smaller side (the shape spans 72-92% of
         * it), centre jittered inside the cell */
        double r = cell_min * (0.36 + 0.10 * pick(d, 100) / 100.0);
        double slack_x = cw / 2.0 - r, slack_y = ch / 2.0 - r;
        double cx = (it->cell % 2) * cw + cw / 2.0 + slack_x * (pick(d, 201) - 100) / 100.0;
        double cy = (it->cell / 2) * ch + ch / 2.0 + slack_y * (pick(d, 201) - 100) / 100.0;
        for (int y = (int)(cy - r) - 1; y <= (int)(cy + r) + 1; y++)
            for (int x = (int)(cx - r) - 1; x <= (int)(cx + r) + 1; x++) {
                if (x < 0 || y < 0 || x >= p->w || y >= p->h) continue;
                double px = x + 0.5 - cx, py = y + 0.5 - cy;
                int in;
                double ax = px < 0 ? -px : px, ay = py < 0 ? -py : py, d2 = px * px + py * py;
                switch (it->shape) {
                case 0: in = d2 <= r * r; break;                                           /* circle */
                case 1: in = ax <= r && ay <= r; break;                                    /* square */
                case 2: in = py <= r && py >= -r && 2 * ax <= py + r; break;               /* triangle, apex up */
                default: in = (ax <= r / 3 && ay <= r) || (ay <= r / 3 && ax <= r); break; /* cross */
                }
                if (in) memcpy(rgb + ((size_t)y * p->w + x) * 3, colour_rgb[it->colour], 3);
            }
    }
}

/* single: exactly one shape (a held-out position question). */
static void new_picture(picture *p, draw *d, const tdm_synth_options *o, int single) {
    p->w = o->min_size + pick(d, o->max_size - o->min_size + 1);
    p->h = p->w; /* square: a tall or wide picture would shrink the shapes of its narrow side */
    if (o->scene == TDM_SYNTH_SCENE_MIXED) {
        p->n = 1 + pick(d, MAX_ITEMS);
    } else { /* one shape 2 times in 5 (only those get "where" questions), else 2-4 */
        int r = pick(d, 5);
        p->n = single || r < 2 ? 1 : r;
    }
    int cells[N_CELLS] = {0, 1, 2, 3};
    for (int i = N_CELLS - 1; i > 0; i--) { /* shuffle the cells, take the first n */
        int j = pick(d, i + 1), t = cells[i];
        cells[i] = cells[j];
        cells[j] = t;
    }
    if (o->scene == TDM_SYNTH_SCENE_MIXED) {
        for (int s = 0; s < p->n; s++) p->it[s] = (item){pick(d, N_SHAPES), pick(d, N_COLOURS), cells[s]};
    } else { /* copies of one shape in one colour */
        int shape = pick(d, N_SHAPES), colour = pick(d, N_COLOURS);
        for (int s = 0; s < p->n; s++) p->it[s] = (item){shape, colour, cells[s]};
    }
    /* reading order, so captions list shapes top-left to bottom-right */
    for (int a = 0; a < p->n; a++)
        for (int b = a + 1; b < p->n; b++)
            if (p->it[b].cell < p->it[a].cell) {
                item t = p->it[a];
                p->it[a] = p->it[b];
                p->it[b] = t;
            }
}

static int count_shape(const picture *p, int shape) {
    int n = 0;
    for (int s = 0; s < p->n; s++) n += p->it[s].shape == shape;
    return n;
}

/* Every shape the same, in the same colour. */
static int one_kind(const picture *p) {
    for (int s = 1; s < p->n; s++)
        if (p->it[s].shape != p->it[0].shape || p->it[s].colour != p->it[0].colour) return 0;
    return 1;
}

/* "A red circle, a green triangle and two blue squares." (groups in reading order) */
static void caption(const picture *p, tdm_strbuf *sb) {
    int seen[N_SHAPES][N_COLOURS] = {{0}}, groups = 0, order[MAX_ITEMS][2];
    for (int s = 0; s < p->n; s++) {
        if (!seen[p->it[s].shape][p->it[s].colour]++) {
            order[groups][0] = p->it[s].shape;
            order[groups][1] = p->it[s].colour;
            groups++;
        }
    }
    for (int g = 0; g < groups; g++) {
        int n = seen[order[g][0]][order[g][1]];
        if (g > 0) tdm_sb_puts(sb, g == groups - 1 ? " and " : ", ");
        const char *w = count_word[n];
        tdm_sb_printf(sb, "%c%s %s %s", g == 0 ? (char)(w[0] - 'a' + 'A') : w[0], w + 1, colour_name[order[g][1]],
                      n == 1 ? shape_name[order[g][0]] : shape_plural[order[g][0]]);
    }
    tdm_sb_puts(sb, ".");
}

/* Question kinds: 0 caption, 1 count all, 2 count one shape, 3 colour, 4 position, 5 shape. */
enum { K_CAPTION, K_COUNT_ALL, K_COUNT_KIND, K_COLOUR, K_POSITION, K_SHAPE };

/* A held-out kind: count, colour, position and shape, a quarter each. */
static int closed_kind(draw *d) {
    static const int kinds[4] = {K_COUNT_ALL, K_COLOUR, K_POSITION, K_SHAPE};
    int kind = kinds[pick(d, 4)];
    return kind == K_COUNT_ALL ? kind + pick(d, 2) : kind; /* all shapes, or one kind */
}

/* A training kind, any of the six. more_where: a lone shape in the one-kind scene, where
 * "where" is drawn twice as often (it is asked about lone shapes only, and with the plain
 * draw the tiny model saw too few to learn it: docs/learning.md). */
static int training_kind(draw *d, int more_where) {
    int kind = pick(d, more_where ? K_SHAPE + 2 : K_SHAPE + 1);
    return kind > K_SHAPE ? K_POSITION : kind;
}

/* One question about the picture and its exact answer: of kind `kind`, or, when kind < 0,
 * of a kind drawn here (closed_only: no captions; more_where: see training_kind). */
static void question(const picture *p, draw *d, int kind_in, int closed_only, int more_where, tdm_strbuf *q,
                     tdm_strbuf *a) {
    for (;;) {
        int kind = kind_in >= 0 ? kind_in : closed_only ? closed_kind(d) : training_kind(d, more_where);
        if (kind == K_CAPTION) {
            tdm_sb_puts(q, q_caption[pick(d, COUNT(q_caption))]);
            caption(p, a);
            return;
        }
        if (kind == K_COUNT_ALL) {
            tdm_sb_puts(q, q_count_all[pick(d, COUNT(q_count_all))]);
            tdm_sb_printf(a, "%d", p->n);
            return;
        }
        if (kind == K_COUNT_KIND) {
            /* mostly shapes that are present, so answers are not nearly always 0 */
            int shape = pick(d, 3) ? p->it[pick(d, p->n)].shape : pick(d, N_SHAPES);
            tdm_sb_printf(q, q_count_kind[pick(d, COUNT(q_count_kind))], shape_plural[shape]);
            tdm_sb_printf(a, "%d", count_shape(p, shape));
            return;
        }
        if (kind == K_SHAPE) { /* the shape in an occupied cell */
            const item *it = &p->it[pick(d, p->n)];
            tdm_sb_printf(q, q_shape[pick(d, COUNT(q_shape))], cell_name[it->cell]);
            tdm_sb_puts(a, shape_name[it->shape]);
            return;
        }
        /* colour and position questions need a shape that occurs exactly once; another
         * kind only when there is none, so the held-out kinds stay a quarter each */
        int unique[MAX_ITEMS], n_unique = 0;
        for (int s = 0; s < p->n; s++)
            if (count_shape(p, p->it[s].shape) == 1) unique[n_unique++] = s;
        if (kind == K_COLOUR && n_unique == 0 && one_kind(p)) { /* copies of one shape in one colour */
            tdm_sb_printf(q, q_colour_plural[pick(d, COUNT(q_colour_plural))], shape_plural[p->it[0].shape]);
            tdm_sb_puts(a, colour_name[p->it[0].colour]);
            return;
        }
        if (n_unique == 0) {
            if (kind_in >= 0) kind_in = -1; /* cannot happen for held-out pictures (see sample) */
            continue;
        }
        int s = unique[pick(d, n_unique)];
        if (kind == K_COLOUR) {
            tdm_sb_printf(q, q_colour[pick(d, COUNT(q_colour))], shape_name[p->it[s].shape]);
            tdm_sb_puts(a, colour_name[p->it[s].colour]);
        } else {
            tdm_sb_printf(q, q_where[pick(d, COUNT(q_where))], shape_name[p->it[s].shape]);
            tdm_sb_puts(a, cell_name[p->it[s].cell]);
        }
        return;
    }
}

static void message(tdm_strbuf *js, const char *role, const char *text, int first) {
    tdm_sb_printf(js, "%s\n      {\"role\": \"%s\", \"content\": ", first ? "" : ",", role);
    tdm_sb_json_string(js, text, strlen(text));
    tdm_sb_puts(js, "}");
}

/* One sample: its JSON object appended to js, its picture (if any) written as PNG. */
static int sample(const tdm_synth_options *o, int test, int64_t i, tdm_strbuf *js, uint8_t *rgb, tdm_error *err) {
    draw d = {o->seed, ((uint64_t)(test ? 2 : 1) << 40) + (uint64_t)i, 0};
    tdm_strbuf q, a;
    tdm_sb_init(&q);
    tdm_sb_init(&a);
    tdm_sb_puts(js, i ? ",\n  {\"messages\": [" : "\n  {\"messages\": [");
    int rc = 0;
    if (!test && i % 20 == 7) { /* text-only: every fact appears once n_train >= 20 * facts */
        int t = (int)((i / 20) % COUNT(text_only));
        message(js, "user", text_only[t][0], 1);
        message(js, "assistant", text_only[t][1], 0);
        tdm_sb_puts(js, "\n    ], \"images\": []}");
    } else {
        picture p;
        /* Held out, one scene: the kind first, so a position question gets a lone shape.
         * (The mixed scene keeps its original order of draws: kind after picture.) */
        int kind = test && o->scene == TDM_SYNTH_SCENE_SAME ? closed_kind(&d) : -1;
        new_picture(&p, &d, o, kind == K_POSITION);
        int first = 1;
        if (!test && pick(&d, 5) == 0) {
            message(js, "system", systems[pick(&d, COUNT(systems))], 1);
            first = 0;
        }
        /* several questions per training picture: more answers that need the picture per
         * vision forward (one question per picture learned more slowly) */
        int turns = test ? 1 : 2 + pick(&d, 3);
        for (int t = 0; t < turns; t++) {
            tdm_sb_clear(&q);
            tdm_sb_clear(&a);
            tdm_sb_puts(&q, t == 0 ? "<image>" : "");
            question(&p, &d, t == 0 ? kind : -1, test, o->scene == TDM_SYNTH_SCENE_SAME && p.n == 1, &q, &a);
            message(js, "user", q.data, first);
            message(js, "assistant", a.data, 0);
            first = 0;
        }
        char rel[64], path[1200];
        snprintf(rel, sizeof rel, "images/%s_%06lld.png", test ? "test" : "train", (long long)i);
        snprintf(path, sizeof path, "%s/%s", o->out_dir, rel);
        tdm_sb_printf(js, "\n    ], \"images\": [\"%s\"]}", rel);
        render(&p, &d, rgb);
        rc = tdm_image_write_png(path, rgb, p.w, p.h, err);
    }
    tdm_sb_free(&q);
    tdm_sb_free(&a);
    return rc;
}

int tdm_synth_generate(const tdm_synth_options *opt, tdm_error *err) {
    tdm_synth_options o = *opt;
    if (o.min_size <= 0) o.min_size = 64;
    if (o.max_size <= 0) o.max_size = 128;
    if (o.min_size < 24 || o.max_size < o.min_size || o.max_size > 4096)
        return tdm_errorf(err, "picture sizes must satisfy 24 <= min (%d) <= max (%d) <= 4096", o.min_size, o.max_size);
    if (o.n_train < 0 || o.n_test < 0 || o.n_train > 10000000 || o.n_test > 10000000)
        return tdm_errorf(err, "sample counts must be between 0 and 10000000");
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/images", o.out_dir);
    if (tdm_mkdirs(dir, err) != 0) return -1;
    uint8_t *rgb = tdm_xmalloc((size_t)o.max_size * o.max_size * 3);
    int rc = 0;
    for (int test = 0; test < 2 && rc == 0; test++) {
        tdm_strbuf js;
        tdm_sb_init(&js);
        tdm_sb_puts(&js, "[");
        int64_t n = test ? o.n_test : o.n_train;
        for (int64_t i = 0; i < n && rc == 0; i++) rc = sample(&o, test, i, &js, rgb, err);
        tdm_sb_puts(&js, "\n]\n");
        if (rc == 0) {
            char path[1200];
            snprintf(path, sizeof path, "%s/%s", o.out_dir, test ? "test.json" : "train.json");
            rc = tdm_write_file_atomic(path, js.data, js.len, err);
        }
        tdm_sb_free(&js);
    }
    free(rgb);
    return rc;
}
