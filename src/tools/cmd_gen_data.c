/* cmd_gen_data.c - `tandem gen-data`: write the built-in synthetic shapes dataset. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "data/synth.h"
#include "tools/cli.h"
#include "tools/commands.h"

_Static_assert(sizeof(tdm_synth_scene) == sizeof(int), "--scene stores the choice's index as an int");

static const tdm_flag FLAGS[] = {
    {.name = "out",
     .kind = TDM_FLAG_PATH,
     .off = offsetof(tdm_synth_options, out_dir),
     .metavar = "DIR",
     .help = "where to write train.json, test.json and images/"},
    {.name = "samples",
     .kind = TDM_FLAG_I64,
     .off = offsetof(tdm_synth_options, n_train),
     .lo = 0,
     .hi = 1e7,
     .def = "2000",
     .metavar = "N",
     .help = "training samples"},
    {.name = "heldout",
     .kind = TDM_FLAG_I64,
     .off = offsetof(tdm_synth_options, n_test),
     .lo = 0,
     .hi = 1e7,
     .def = "200",
     .metavar = "M",
     .help = "held-out closed questions"},
    {.name = "seed",
     .kind = TDM_FLAG_U64,
     .off = offsetof(tdm_synth_options, seed),
     .def = "1234",
     .metavar = "S",
     .help = "the same flags always give the same bytes"},
    {.name = "min-size",
     .kind = TDM_FLAG_INT,
     .off = offsetof(tdm_synth_options, min_size),
     .lo = 24,
     .hi = 4096,
     .def = "64",
     .metavar = "PX",
     .help = "smallest picture side"},
    {.name = "max-size",
     .kind = TDM_FLAG_INT,
     .off = offsetof(tdm_synth_options, max_size),
     .lo = 24,
     .hi = 4096,
     .def = "128",
     .metavar = "PX",
     .help = "largest picture side"},
    {.name = "scene",
     .kind = TDM_FLAG_CHOICE,
     .off = offsetof(tdm_synth_options, scene),
     .choices = "same|mixed",
     .def = "same",
     .metavar = "same|mixed",
     .help = "same: 1-4 copies of one shape in one colour per picture; mixed: 1-4 shapes of any kind and colour, "
             "so questions pick one shape out of several (harder to learn)"},
};

static const tdm_flags P = {
    .command = "tandem gen-data",
    .usage = "tandem gen-data --out DIR [--samples N] [--heldout M] [--seed S] [--min-size PX] [--max-size PX]\n"
             "                       [--scene same|mixed]",
    .about = "Writes DIR/train.json (N training samples), DIR/test.json (M held-out closed questions) in the\n"
             "MindSpeed-MM \"messages\"/\"images\" format, and their PNG pictures of coloured shapes under\n"
             "DIR/images/.",
    .flags = FLAGS,
    .n_flags = (int)(sizeof FLAGS / sizeof *FLAGS),
};

int cmd_gen_data(int argc, char **argv) {
    tdm_synth_options o = {0};
    tdm_flags_defaults(&P, &o);
    int done = tdm_cli_parse(&P, &o, argc, argv, NULL, NULL);
    if (done >= 0) return done;
    if (!o.out_dir) {
        fprintf(stderr, "tandem gen-data: --out DIR is required (tandem gen-data --help)\n");
        return 2;
    }
    if (o.max_size < o.min_size) {
        fprintf(stderr, "tandem gen-data: --max-size %d is smaller than --min-size %d\n", o.max_size, o.min_size);
        return 2;
    }
    uint64_t t0 = tdm_now_ns();
    tdm_error err;
    if (tdm_synth_generate(&o, &err) != 0) {
        fprintf(stderr, "tandem gen-data: %s\n", err.msg);
        return 1;
    }
    printf("wrote %lld training and %lld held-out samples to %s in %.1f s\n", (long long)o.n_train, (long long)o.n_test,
           o.out_dir, (double)(tdm_now_ns() - t0) * 1e-9);
    return 0;
}
