#include "tools/cli.h"

#include "core/platform.h"
#include "core/strbuf.h"

void tdm_cli_help(const tdm_flags *p, FILE *f) {
    tdm_strbuf sb;
    tdm_sb_init(&sb);
    tdm_flags_format_help(p, &sb);
    fputs(sb.data ? sb.data : "", f);
    tdm_sb_free(&sb);
}

int tdm_cli_print_version(void) {
    tdm_platform pl;
    tdm_platform_read(&pl);
    printf("tandem %s\nbuilt for %s\n", tdm_version(), pl.build_target);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int answer(const tdm_flags *p, int what) {
    if (what == TDM_FLAGS_VERSION) return tdm_cli_print_version();
    tdm_cli_help(p, stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}

int tdm_cli_early(const tdm_flags *p, int argc, char **argv) {
    int what = tdm_flags_wants(p, argc - 1, argv + 1);
    return what ? answer(p, what) : -1;
}

int tdm_cli_parse(const tdm_flags *p, void *target, int argc, char **argv, char **rest, int *n_rest) {
    tdm_error err = {{0}};
    int rc = tdm_flags_parse(p, target, argc - 1, argv + 1, rest, n_rest, &err);
    if (rc > 0) return answer(p, rc);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", p->command, err.msg);
        return 2;
    }
    return -1;
}
