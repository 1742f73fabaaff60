/* Helpers shared by the verbs: numbers, the median, messages and JSON. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mpi.h>

#include "cli.h"
#include "gradsync/nn.h"

/* strto* skip leading spaces and take a sign; the options take neither (a
 * '-' only where the range allows negative values). A leading zero before
 * another digit is refused too: C reads "010" as 8 and "0x10" as 16, and a
 * user who writes them may mean either. */
static int plain_number(const char *s) {
  if (s == NULL || *s == '\0' || isspace((unsigned char)*s) || *s == '+') return 0;
  const char *d = *s == '-' ? s + 1 : s;
  if (d[0] == '0' && (isdigit((unsigned char)d[1]) || d[1] == 'x' || d[1] == 'X')) return 0;
  return 1;
}

int cli_parse_bytes(const char *s, size_t *out) {
  if (!plain_number(s) || !isdigit((unsigned char)*s)) return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return -1;
  int range = errno == ERANGE;
  if (errno && !range) return -1;
  unsigned long long mult = 1;
  if (*end) {
    char u = (char)(*end | 0x20);
    if (u == 'k') mult = 1ull << 10;
    else if (u == 'm') mult = 1ull << 20;
    else if (u == 'g') mult = 1ull << 30;
    else if (u != 'b') return -1;
    if (u != 'b') end++;
    if (strcasecmp(end, "") != 0 && strcasecmp(end, "b") != 0 &&
        strcasecmp(end, "ib") != 0)
      return -1;
  }
  if (range || v > SIZE_MAX / mult) return -2;
  *out = (size_t)(v * mult);
  return 0;
}

int cli_parse_long(const char *s, long min, long max, long *out) {
  if (!plain_number(s)) return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int cli_parse_int(const char *s, int min, int max, int *out) {
  long v;
  if (cli_parse_long(s, min, max, &v)) return -1;
  *out = (int)v;
  return 0;
}

/* gradsync train's long options, and those of its DLRM trainer: the one
 * list, which train's getopt_long parses with (cmd_train.c,
 * cmd_train_dlrm.c) and another verb reads a train command line by
 * (train_option_scan below), so that a prefix means there what train takes
 * it for. */
const struct option cli_train_longs[] = {
    {"model", required_argument, 0, 'm'},   {"epochs", required_argument, 0, 'e'},
    {"batch", required_argument, 0, 'b'},   {"lr", required_argument, 0, 'l'},
    {"momentum", required_argument, 0, 'M'}, {"nesterov", no_argument, 0, 'N'},
    {"weight-decay", required_argument, 0, 'W'},
    {"schedule", required_argument, 0, 'S'},
    {"warmup-epochs", required_argument, 0, 'w'},
    {"compress", required_argument, 0, 'Z'}, {"no-ef", no_argument, 0, 'E'},
    {"compress-warmup-steps", required_argument, 0, 'U'},
    {"ef-decay", required_argument, 0, 'F'},
    {"policy", required_argument, 0, 'p'},  {"data", required_argument, 0, 'd'},
    {"synthetic", required_argument, 0, 'y'},
    {"checkpoint", required_argument, 0, 'c'}, {"resume", optional_argument, 0, 'r'},
    {"global-batch", required_argument, 0, 'B'}, {"scale-lr", required_argument, 0, 'L'},
    {"seed", required_argument, 0, 's'},    {"max-steps", required_argument, 0, 'x'},
    {"dropout", required_argument, 0, 'D'}, {"json", no_argument, 0, 'j'},
    {"data-cache", required_argument, 0, 'C'}, {"no-prefetch", no_argument, 0, 'P'},
    {"optimizer", required_argument, 0, 'O'},
    {"kfac-dist", required_argument, 0, 'K'}, {"kfac-inverse", required_argument, 0, 'I'},
    {"kfac-cov-every", required_argument, 0, 'v'},
    {"kfac-inv-every", required_argument, 0, 'i'},
    {"kfac-damping", required_argument, 0, 'g'}, {"kfac-decay", required_argument, 0, 'X'},
    {"kfac-kl-clip", required_argument, 0, 'k'},
    {"sync", required_argument, 0, 'Y'},    {"ps", required_argument, 0, 'Q'},
    {"straggler", required_argument, 0, 'G'},
    {"async-lr-scale", required_argument, 0, 'A'},
    {"async-momentum", required_argument, 0, 'a'},
    {"commit-every", required_argument, 0, 'T'},
    {"stop-at-step", required_argument, 0, 'z'},
    {"precision", required_argument, 0, 'R'},
    {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};

const struct option cli_train_dlrm_longs[] = {
    {"model", required_argument, 0, 'm'},       {"tables", required_argument, 0, 't'},
    {"sharding", required_argument, 0, 's'},    {"plan", required_argument, 0, 'p'},
    {"a2a-precision", required_argument, 0, 'P'}, {"batch", required_argument, 0, 'b'},
    {"epochs", required_argument, 0, 'e'},      {"steps", required_argument, 0, 'n'},
    {"eval", required_argument, 0, 'E'},        {"bottom-mlp", required_argument, 0, 'B'},
    {"top-mlp", required_argument, 0, 'T'},     {"interaction", required_argument, 0, 'i'},
    {"lr", required_argument, 0, 'l'},          {"embed-lr", required_argument, 0, 'L'},
    {"embed-sgd", no_argument, 0, 'g'},         {"pooling", required_argument, 0, 'o'},
    {"zipf", required_argument, 0, 'z'},        {"seed", required_argument, 0, 'S'},
    {"json", no_argument, 0, 'j'},              {"help", no_argument, 0, 'h'},
    {"checkpoint", required_argument, 0, 'c'},  {"commit-every", required_argument, 0, 'C'},
    {"stop-at-step", required_argument, 0, 'X'}, {"resume", optional_argument, 0, 'r'},
    {"global-batch", required_argument, 0, 'G'}, {"data", required_argument, 0, 'D'},
    {"no-prefetch", no_argument, 0, 'F'},       {"policy", required_argument, 0, 'y'},
    {"lookup", required_argument, 0, 'K'},
    {"frequency-threshold", required_argument, 0, 'Q'},
    {"dcn-layers", required_argument, 0, 'x'}, {"dcn-rank", required_argument, 0, 'R'},
    {0, 0, 0, 0}};

/* The option table argv is parsed with: the DLRM trainer's when "--model
 * dlrm" or "--model=dlrm" is among them, as cmd_train dispatches. */
static const struct option *train_table(char *const *argv, int argc) {
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) break;
    if (strcmp(argv[i], "--model=dlrm") == 0 ||
        (strcmp(argv[i], "--model") == 0 && i + 1 < argc && strcmp(argv[i + 1], "dlrm") == 0))
      return cli_train_dlrm_longs;
  }
  return cli_train_longs;
}

/* The option "--word" (len characters after the dashes) resolves to, as
 * getopt_long resolves it: an exact name, else the one name it is a
 * prefix of; NULL when unknown or ambiguous. */
static const struct option *train_resolve(const struct option *t, const char *word,
                                          size_t len) {
  const struct option *found = NULL;
  int matches = 0;
  for (; t->name; t++) {
    if (strncmp(t->name, word, len) != 0) continue;
    if (strlen(t->name) == len) return t;
    found = t;
    matches++;
  }
  return matches == 1 ? found : NULL;
}

/* Scans argv as train's getopt_long would: *given receives whether NAME
 * ("--checkpoint") is given, in full, as an unambiguous prefix ("--checkp")
 * or with "=value"; returns its last value (NULL when none). Until
 * 2026-12-07 only the whole name counted, so `gradsync run --elastic` did
 * not see "--global-b 48", which train takes as --global-batch. */
static const char *train_option_scan(char *const *argv, int argc, const char *name,
                                     int *given) {
  const struct option *t = train_table(argv, argc);
  const struct option *want = strncmp(name, "--", 2) == 0 ? train_resolve(t, name + 2,
                                                                       strlen(name + 2))
                                                       : NULL;
  const char *v = NULL;
  *given = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) break;
    if (strncmp(a, "--", 2) != 0 || a[2] == '\0') continue;
    size_t len = strcspn(a + 2, "=");
    const struct option *o = train_resolve(t, a + 2, len);
    int eq = a[2 + len] == '=';
    if (o == NULL || want == NULL) {
      /* Not one of train's options (another program's, say): the whole
       * name only, as before. */
      if (strncmp(a, name, strlen(name)) == 0 && strlen(name) == len + 2) {
        *given = 1;
        if (eq) v = a + 2 + len + 1;
        else if (i + 1 < argc) v = argv[++i];
      }
      continue;
    }
    const char *val = NULL;
    if (eq) val = a + 2 + len + 1;
    else if (o->has_arg == required_argument && i + 1 < argc) val = argv[++i];
    if (o == want) {
      *given = 1;
      if (val) v = val;
    }
  }
  return v;
}

const char *cli_option_value(char *const *argv, int argc, const char *name) {
  int given;
  return train_option_scan(argv, argc, name, &given);
}

int cli_option_given(char *const *argv, int argc, const char *name) {
  int given;
  train_option_scan(argv, argc, name, &given);
  return given;
}

int cli_option_is(char *const *argv, int argc, const char *name, const char *value) {
  const char *v = cli_option_value(argv, argc, name);
  return v != NULL && strcmp(v, value) == 0;
}

int cli_dlrm_plan_ranks(char *const *argv, int argc, char *why, size_t why_len) {
  const char *plan = cli_option_value(argv, argc, "--plan");
  if (!cli_option_is(argv, argc, "--model", "dlrm") || !plan) return 0;
  unsigned char *text = NULL;
  size_t n = 0;
  if (gs_nn_file_read(plan, "sharding plan", (size_t)1 << 30, &text, &n) != GS_OK) {
    snprintf(why, why_len, "--plan: %s", gs_last_error());
    return -1;
  }
  cJSON *root = cJSON_ParseWithLength((const char *)text, n);
  gs_free(text);
  const cJSON *rk = root ? cJSON_GetObjectItemCaseSensitive(root, "ranks") : NULL;
  int r = cJSON_IsNumber(rk) && rk->valuedouble >= 1 && rk->valuedouble <= 1 << 20
              ? (int)rk->valuedouble : -1;
  cJSON_Delete(root);
  if (r < 0) snprintf(why, why_len, "--plan %s: not a sharding plan (no \"ranks\")", plan);
  return r;
}

int cli_parse_double(const char *s, double min, double max, double *out) {
  if (!plain_number(s)) return -1;
  /* Decimal only: strtod would also read "nan", "inf" and hexadecimal. */
  if (strspn(s, "0123456789.eE-+") != strlen(s)) return -1;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  /* ERANGE (overflow, or underflow to 0) is refused. */
  if (errno || end == s || *end || !isfinite(v) || !(v >= min && v <= max)) return -1;
  *out = v == 0 ? 0.0 : v; /* "-0" is 0 (it was printed back as "-0") */
  return 0;
}

int cli_parse_seconds_suffix(const char *s, double min, double max, double *out) {
  size_t n = strlen(s);
  if (n == 0 || s[n - 1] != 's') return 1;
  char num[64];
  if (n >= sizeof num) return -1;
  memcpy(num, s, n - 1);
  num[n - 1] = '\0';
  return cli_parse_double(num, min, max, out) ? -1 : 0;
}

int cli_parse_float(const char *s, double min, double max, float *out) {
  double v;
  if (cli_parse_double(s, min, max, &v)) return -1;
  if (v != 0 && fabs(v) < FLT_MIN) return -1;
  *out = (float)v;
  return 0;
}

int cli_compress_arg(const char *verb, const char *arg) {
  if (*arg != '\0') return 0;
  cli_error(verb, "--compress '' names no compressor (leave the option out for none)");
  return -1;
}

int cli_link_net_arg(const char *verb, const char *name, double *bps) {
  if (strcasecmp(name, "shm") == 0) {
    cli_error(verb, "--net shm: shm is plan's and simulate's name for one machine's shared "
              "memory, not a link run builds; leave --net out to run the ranks over this "
              "machine's shared memory");
    return -1;
  }
  if (gs_net_rate(name, bps) == GS_OK) return 0;
  if (*name == '\0')
    cli_error(verb, "--net needs a rate from 1kbit to 1tbit such as 100mbit, 1gbit or "
              "10gbit (got '')");
  else /* not gs_net_rate's message: its list names shm, which run cannot build */
    cli_error(verb, "--net: unknown network '%s' (expected 100mbit, 1gbit, 10gbit, 25gbit, "
              "100gbit (or any rate from 1kbit to 1tbit in bit, kbit, mbit, gbit, tbit) or "
              "their aliases 1GbE, 10GbE, 25GbE, 100GbIB)", name);
  return -1;
}

int cli_policy_list(const char *verb, const char *policy, char *buf, size_t n,
                    const char **listed, size_t max, size_t *count) {
  *count = 0;
  if (snprintf(buf, n, "%s", policy) >= (int)n) {
    cli_error(verb, "--policy: the list is longer than %zu characters", n - 1);
    return -1;
  }
  /* An empty item (",," or a comma at either end) is a typo, not skipped. */
  size_t len = strlen(policy);
  if (policy[0] == ',' || (len > 0 && policy[len - 1] == ',') || strstr(policy, ",,")) {
    cli_error(verb, "--policy %s: an empty item in the list", policy);
    return -1;
  }
  char *save = NULL, *prev_end = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (strncmp(tok, "first=", 6) == 0 && prev_end) {
      *prev_end = ','; /* rejoin "bucket:25,first=1" */
    } else {
      if (*count == max) {
        cli_error(verb, "--policy: more than %zu policies", max);
        return -1;
      }
      listed[(*count)++] = tok;
    }
    prev_end = tok + strlen(tok);
  }
  if (*count == 0) {
    cli_error(verb, "--policy: expected a policy, a list of them or all, got '%s'", policy);
    return -1;
  }
  for (size_t k = 0; k < *count; k++) {
    gs_plan_policy pp;
    if (gs_plan_policy_parse(listed[k], &pp) != GS_OK) {
      cli_error(verb, "--policy: %s", gs_last_error());
      return -1;
    }
  }
  return 0;
}

int cli_coding_rate_arg(const char *verb, const char *arg, double *ns) {
  if (cli_parse_double(arg, 0, 1e6, ns) == 0) return 0;
  cli_error(verb, "--coding-rate: expected ns per element from 0 to 1e6, got '%s'", arg);
  return -1;
}

gs_status cli_coding(gs_compressor *zc, double coding_ns, const gs_profile *prof, int tries,
                     gs_cost_coding *out) {
  if (coding_ns >= 0) return gs_cost_coding_rate(coding_ns * 1e-9, out);
  size_t *sizes = malloc((prof->ntensors ? prof->ntensors : 1) * sizeof *sizes);
  if (sizes == NULL) return gs_error(GS_ERR_NOMEM, "out of memory");
  size_t n = 0;
  for (size_t i = prof->ntensors; i-- > 0;)
    if (prof->tensors[i].dtype == GS_F32 && prof->tensors[i].numel > 0)
      sizes[n++] = (size_t)prof->tensors[i].numel;
  if (n == 0) sizes[n++] = GS_COMPRESS_MEASURE_MIN; /* nothing compressed */
  gs_status st = GS_OK;
  for (int t = 0; t < (tries > 0 ? tries : 1) && st == GS_OK; t++) {
    gs_cost_coding m;
    st = gs_compress_measure_coding(zc, sizes, n, 0, &m);
    if (st != GS_OK) break;
    if (t == 0) {
      *out = m;
      continue;
    }
    /* The same sizes each time, but the work bound may stop a slowed try
     * early: the sizes both reached. */
    if (m.npoints < out->npoints) out->npoints = m.npoints;
    for (int i = 0; i < out->npoints; i++) out->secs[i] = fmin(out->secs[i], m.secs[i]);
  }
  free(sizes);
  return st;
}

double cli_coding_ns(const gs_cost_coding *m) {
  const int last = m->npoints - 1;
  return last < 0 ? 0 : m->secs[last] / m->elems[last] * 1e9;
}

int cli_under_launcher(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMI_SIZE") != NULL ||
         getenv("PMIX_RANK") != NULL;
}

/* Whether path can be executed as a program: a regular file with execute
 * permission, and a script's interpreter (its "#!" line) one too. 0, or -1
 * with why (of size n) saying what is wrong. */
static int exe_ok(const char *path, char *why, size_t n, int depth) {
  struct stat st;
  if (stat(path, &st) != 0) {
    if (errno == ENOENT) snprintf(why, n, "is not found");
    else snprintf(why, n, "%s", strerror(errno));
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    snprintf(why, n, "is a directory");
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, n, "is not a regular file");
    return -1;
  }
  if (access(path, X_OK) != 0) {
    snprintf(why, n, "is not executable (%s)", strerror(errno));
    return -1;
  }
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 0; /* executable but unreadable: exec may still run it */
  char line[512];
  size_t got = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[got] = '\0';
  /* Neither an ELF program nor a #! script: execve fails (ENOEXEC), which
   * mpirun reported as a rank's exit status 131. */
  if (!(got >= 4 && memcmp(line, "\177ELF", 4) == 0) && !(got >= 2 && line[0] == '#' &&
                                                          line[1] == '!')) {
    snprintf(why, n, "is neither an ELF program nor a #! script (execve: %s)",
             strerror(ENOEXEC));
    return -1;
  }
  if (got < 2 || line[0] != '#' || line[1] != '!') return 0;
  /* The interpreter: the first word after "#!" (the kernel's rule). */
  char *p = line + 2;
  while (*p == ' ' || *p == '\t') p++;
  size_t len = strcspn(p, " \t\r\n");
  if (len == 0 || p[len] == '\0') return 0; /* no interpreter, or a line beyond 512 */
  p[len] = '\0';
  char inner[256];
  if (p[0] == '/' && depth < 4 && exe_ok(p, inner, sizeof inner, depth + 1) != 0) {
    snprintf(why, n, "its interpreter %s (its #! line) %s", p, inner);
    return -1;
  }
  return 0;
}

int cli_find_exe_why(const char *name, char *out, size_t size, char *why, size_t n) {
  if (!name || !*name) {
    snprintf(why, n, "is empty");
    return -1;
  }
  if (strchr(name, '/')) {
    snprintf(out, size, "%s", name);
    return exe_ok(name, why, n, 0);
  }
  const char *env = getenv("PATH");
  char path[4096];
  snprintf(path, sizeof path, "%s:/usr/sbin:/sbin", env ? env : "/usr/bin:/bin");
  snprintf(why, n, "is not found in PATH");
  for (char *save = NULL, *dir = strtok_r(path, ":", &save); dir;
       dir = strtok_r(NULL, ":", &save)) {
    struct stat st;
    snprintf(out, size, "%s/%s", *dir ? dir : ".", name);
    if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
      return exe_ok(out, why, n, 0);
  }
  return -1;
}

void cli_warn_checkpoint_replaced(const char *verb, const char *dir, int dlrm) {
  const char *file = dlrm ? "dlrm.json" : "checkpoint.json";
  char path[PATH_MAX], what[160] = "";
  if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) return;
  if (access(path, F_OK) != 0) return;
  /* Unreadable or not JSON: the commit is there all the same, unnamed. */
  unsigned char *text = NULL;
  size_t n = 0;
  cJSON *j = NULL;
  if (gs_nn_file_read(path, "checkpoint manifest", (size_t)64 << 20, &text, &n) == GS_OK)
    j = cJSON_ParseWithLength((const char *)text, n);
  gs_free(text);
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
  const cJSON *epoch = cJSON_GetObjectItemCaseSensitive(j, "epoch");
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
  if (dlrm && cJSON_IsNumber(step))
    snprintf(what, sizeof what, " (a DLRM run's, at step %.0f)", step->valuedouble);
  else if (dlrm)
    snprintf(what, sizeof what, " (a DLRM run's)");
  else if (cJSON_IsString(model) && cJSON_IsNumber(epoch)) {
    char m[130];
    snprintf(what, sizeof what, " (model %.40s, epoch %.0f)",
             cli_clean_text(m, sizeof m, model->valuestring), epoch->valuedouble);
  }
  cJSON_Delete(j);
  char clean[PATH_MAX * 3];
  fprintf(stderr, "gradsync %s: warning: --checkpoint %s holds a commit%s, in %s: without "
          "--resume this run starts afresh and its first commit replaces it\n", verb,
          cli_clean_text(clean, sizeof clean, dir), what, file);
}

int cli_check_out_dir(const char *verb, const char *opt, const char *dir) {
  struct stat st;
  const char *at = dir;
  char parent[PATH_MAX];
  if (stat(dir, &st) != 0) {
    if (errno != ENOENT) {
      cli_error(verb, "%s %s: %s", opt, dir, strerror(errno));
      return 2;
    }
    /* To be made: its parent must be a directory it can be made in. */
    snprintf(parent, sizeof parent, "%s", dir);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    if (slash == NULL) snprintf(parent, sizeof parent, ".");
    else if (slash == parent) parent[1] = '\0';
    else *slash = '\0';
    at = parent;
    if (stat(parent, &st) != 0) {
      cli_error(verb, "%s %s: cannot create the directory: %s", opt, dir, strerror(errno));
      return 2;
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    cli_error(verb, "%s %s: %s is not a directory", opt, dir, at);
    return 2;
  }
  if (access(at, W_OK | X_OK) != 0) {
    cli_error(verb, "%s %s: cannot write in %s: %s", opt, dir, at, strerror(errno));
    return 2;
  }
  return 0;
}

int cli_find_exe(const char *name, char *out, size_t size) {
  char why[320];
  return cli_find_exe_why(name, out, size, why, sizeof why);
}

/* `gradsync run` says in GRADSYNC_TTY whether the user watches a terminal,
 * since ranks write to mpirun's pseudo-terminal even when the user's output
 * is a file. */
int cli_on_terminal(void) {
  const char *s = getenv("GRADSYNC_TTY");
  if (s && *s) return strcmp(s, "1") == 0;
  return isatty(STDOUT_FILENO);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_cpu_seconds(clockid_t which) {
  struct timespec ts;
  clock_gettime(which, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cli_median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Appends the n bytes of seq to out[*len] if they fit whole with the
 * terminator in cap; returns 0, or -1 when they did not fit. */
static int put_seq(char *out, size_t *len, size_t cap, const unsigned char *seq, size_t n) {
  if (*len + n + 1 > cap) return -1;
  memcpy(out + *len, seq, n);
  *len += n;
  return 0;
}

char *cli_clean_text(char *out, size_t cap, const char *in) {
  static const unsigned char fffd[3] = {0xEF, 0xBF, 0xBD};
  if (cap == 0) return out;
  size_t len = 0;
  const unsigned char *p = (const unsigned char *)(in ? in : "");
  int full = 0;
  while (*p && !full) {
    unsigned char b = p[0];
    size_t n = 0; /* bytes of a valid sequence at p, 0 if invalid */
    unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (b < 0x80) n = 1;
    else if (b >= 0xC2 && b <= 0xDF) n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
      n = 3;
      if (b == 0xE0) lo = 0xA0;      /* overlong */
      else if (b == 0xED) hi = 0x9F; /* surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4;
      if (b == 0xF0) lo = 0x90;      /* overlong */
      else if (b == 0xF4) hi = 0x8F; /* above U+10FFFF */
    }
    for (size_t k = 1; k < n; k++) {
      unsigned c = p[k];
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) {
        n = 0;
        break;
      }
    }
    if (n == 0) { /* one replacement per byte of an invalid sequence */
      full = put_seq(out, &len, cap, fffd, 3) != 0;
      p++;
      continue;
    }
    /* Control characters: C0 and DEL, and C1 (U+0080..U+009F, C2 80..9F). */
    int control = (n == 1 && (b < 0x20 || b == 0x7F)) || (n == 2 && b == 0xC2 && p[1] < 0xA0);
    full = (control ? put_seq(out, &len, cap, fffd, 3) : put_seq(out, &len, cap, p, n)) != 0;
    p += n;
  }
  out[len] = '\0';
  return out;
}

const char *cli_secs(char *buf, size_t len, double s) {
  double a = s < 0 ? -s : s;
  snprintf(buf, len, "%.*fs", a >= 1000 ? 0 : a >= 100 ? 1 : 2, s);
  return buf;
}

int cli_text_width(const char *s) {
  int n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80;
  return n;
}

char *cli_cell(char *out, size_t cap, const char *text, int width) {
  if (cap == 0) return out;
  char clean[1024];
  cli_clean_text(clean, sizeof clean, text);
  size_t len = 0;
  int chars = 0;
  for (const char *p = clean; *p && chars < width; chars++) {
    size_t n = 1;
    while (((unsigned char)p[n] & 0xC0) == 0x80) n++;
    if (len + n >= cap) break;
    memcpy(out + len, p, n);
    len += n;
    p += n;
  }
  for (; chars < width && len + 1 < cap; chars++) out[len++] = ' ';
  out[len] = '\0';
  return out;
}

/* Replaces *name by its cleaned copy (a gs_malloc'd string, as the profile
 * owns its names through gs_free). */
static gs_status clean_name(char **name) {
  if (*name == NULL) return GS_OK;
  size_t cap = 3 * strlen(*name) + 1;
  char *c = gs_malloc(cap);
  if (c == NULL) return gs_error(GS_ERR_NOMEM, "out of memory for a name of %zu bytes", cap);
  cli_clean_text(c, cap, *name);
  gs_free(*name);
  *name = c;
  return GS_OK;
}

double cli_profile_bytes(const gs_profile *p) {
  double s = 0;
  for (size_t i = 0; i < p->ntensors; i++) s += (double)gs_profile_tensor_bytes(p, i);
  return s;
}

gs_status cli_clean_profile(gs_profile *p) {
  gs_status st = clean_name(&p->name);
  for (size_t i = 0; i < p->ntensors && st == GS_OK; i++) st = clean_name(&p->tensors[i].name);
  return st;
}

/* The line cli_vmessage prints, into line (and the cleaned message alone
 * into msg_out, when given). */
static void format_message(char *line, size_t n, char *msg_out, size_t msg_n, const char *verb,
                           int rank, int usage, const char *fmt, va_list ap) {
  char msg[2048], clean[3 * sizeof msg];
  vsnprintf(msg, sizeof msg, fmt, ap);
  cli_clean_text(clean, sizeof clean, msg);
  char where[32] = "";
  if (rank >= 0) snprintf(where, sizeof where, "rank %d: ", rank);
  snprintf(line, n, "gradsync %s: %s%s%s\n", verb, where, clean, usage ? " (see --help)" : "");
  if (msg_out && msg_n > 0) { /* cut to fit (a vote's message) */
    size_t k = strlen(clean) < msg_n - 1 ? strlen(clean) : msg_n - 1;
    while (k > 0 && ((unsigned char)clean[k] & 0xC0) == 0x80) k--; /* whole characters */
    memcpy(msg_out, clean, k);
    msg_out[k] = '\0';
  }
}

#define CLI_LINE_MAX (3 * 2048 + 128)

void cli_vmessage(const char *verb, int rank, int usage, const char *fmt, va_list ap) {
  char line[CLI_LINE_MAX];
  format_message(line, sizeof line, NULL, 0, verb, rank, usage, fmt, ap);
  /* One write per message, so that ranks sharing a terminal do not
   * interleave within a line. */
  fputs(line, stderr);
  fflush(stderr);
}

/* Between cli_argv_errors(1) and (0) under a launcher, the first error is
 * kept (its line and its message) and printed at once by rank 0 alone;
 * the other ranks hold it until cli_rank_connect knows whether every rank
 * said the same (rank 0's line was enough then), or print it at exit. */
static int argv_errors;
static char held_line[CLI_LINE_MAX], held_msg[GS_VOTE_MESSAGE];
static int held_kept, held_pending;

void cli_argv_errors(int on) { argv_errors = on; }

/* This process's rank as the MPI launcher numbered it; -1 without one. */
static int launcher_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *s = getenv(vars[i]);
    int r;
    if (s && *s && cli_parse_int(s, 0, INT_MAX, &r) == 0) return r;
  }
  return -1;
}

const char *cli_argv_error_message(void) { return held_kept ? held_msg : NULL; }

void cli_argv_error_release(int print) {
  if (held_pending && print) {
    fputs(held_line, stderr);
    fflush(stderr);
  }
  held_pending = 0;
}

static void print_held(void) { cli_argv_error_release(1); }

void cli_error(const char *verb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int at = argv_errors ? launcher_rank() : -1;
  if (at < 0) {
    cli_vmessage(verb, -1, 1, fmt, ap);
  } else if (!held_kept) {
    format_message(held_line, sizeof held_line, held_msg, sizeof held_msg, verb, -1, 1, fmt,
                   ap);
    held_kept = 1;
    if (at == 0) {
      fputs(held_line, stderr);
      fflush(stderr);
    } else {
      static int registered;
      if (!registered) registered = atexit(print_held) == 0;
      held_pending = 1;
    }
  } else if (at == 0) {
    cli_vmessage(verb, -1, 1, fmt, ap);
  }
  va_end(ap);
}

void cli_fail(const char *verb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cli_vmessage(verb, -1, 0, fmt, ap);
  va_end(ap);
}

/* The long options of which name (without "--") is a prefix but none is
 * name itself, listed "--a, --b" in buf: getopt_long's ambiguous option.
 * Returns how many. */
static int ambiguous_candidates(const char *name, const struct option *longs, char *buf,
                                size_t cap) {
  size_t n = strlen(name), len = 0;
  int k = 0;
  buf[0] = '\0';
  for (const struct option *o = longs; o && o->name; o++) {
    if (strcmp(o->name, name) == 0) return 0;
    if (strncmp(o->name, name, n) != 0) continue;
    int w = snprintf(buf + len, cap - len, "%s--%s", k ? ", " : "", o->name);
    if (w > 0 && (size_t)w < cap - len) len += (size_t)w;
    k++;
  }
  return k;
}

int cli_getopt_error(const char *verb, int c, char *const *argv, const struct option *longs) {
  const char *arg = optind > 0 ? argv[optind - 1] : "";
  char name[128], cands[1024];
  if (strncmp(arg, "--", 2) == 0) {
    snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
  } else if (optopt > 0 && optopt < 256) {
    snprintf(name, sizeof name, "-%c", optopt);
  } else {
    snprintf(name, sizeof name, "%s", arg);
  }
  if (c == ':')
    cli_error(verb, "option '%s' needs a value", name);
  else if (strncmp(arg, "--", 2) == 0 && optopt != 0 && strchr(arg, '='))
    cli_error(verb, "option '%s' takes no value", name);
  else if (strncmp(arg, "--", 2) == 0 &&
           ambiguous_candidates(name + 2, longs, cands, sizeof cands) > 1)
    cli_error(verb, "option '%s' is ambiguous: %s", name, cands);
  else
    cli_error(verb, "unknown option '%s'", name);
  return 2;
}

int cli_once(const char *verb, cli_seen *s, int c, const struct option *longs) {
  if (s->seen[c & 0xff]++ == 0) return 0;
  const char *name = "?";
  for (const struct option *o = longs; o && o->name; o++)
    if (o->val == c) {
      name = o->name;
      break;
    }
  cli_error(verb, "option --%s given more than once", name);
  return 2;
}

void cli_print_json(FILE *f, cJSON *obj) {
  char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
  if (s) fprintf(f, "%s\n", s);
  cJSON_free(s);
  cJSON_Delete(obj);
}

/* Records keep the precision they had when written with printf; JSON has
 * no NaN nor infinity. */
void cli_json_add(cJSON *obj, const char *name, double v, const char *fmt) {
  if (!isfinite(v)) {
    cJSON_AddNullToObject(obj, name);
    return;
  }
  char buf[64];
  snprintf(buf, sizeof buf, fmt, v);
  cJSON_AddNumberToObject(obj, name, strtod(buf, NULL));
}

/* Set by cli_rank_init while no other thread can be inside MPI. */
char cli_mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];

void cli_print_env_json(FILE *f) {
  struct utsname u;
  uname(&u);
  char kernel[2 * sizeof u.release + 2];
  snprintf(kernel, sizeof kernel, "%s %s", u.sysname, u.release);
  char mpiver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  if (cli_mpi_version[0]) {
    snprintf(mpiver, sizeof mpiver, "%s", cli_mpi_version);
  } else {
    int len = 0;
    MPI_Get_library_version(mpiver, &len);
  }
  /* The library's banner spans lines; one line reads better in a record. */
  for (char *p = mpiver; *p; p++)
    if (*p == '\n' || *p == '\t') *p = ' ';
  for (size_t n = strlen(mpiver); n > 0 && mpiver[n - 1] == ' ';) mpiver[--n] = '\0';
  char cpu[256] = "unknown";
  FILE *ci = fopen("/proc/cpuinfo", "r");
  if (ci) {
    char line[512];
    while (fgets(line, sizeof line, ci)) {
      if (strncmp(line, "model name", 10) == 0) {
        char *c = strchr(line, ':');
        if (c) {
          snprintf(cpu, sizeof cpu, "%s", c + 2);
          cpu[strcspn(cpu, "\n")] = '\0';
        }
        break;
      }
    }
    fclose(ci);
  }
  cJSON *env = cJSON_CreateObject();
  cJSON_AddStringToObject(env, "gradsync", GRADSYNC_VERSION);
  cJSON_AddStringToObject(env, "kernel", kernel);
  cJSON_AddStringToObject(env, "machine", u.machine);
  cJSON_AddStringToObject(env, "cpu", cpu);
  cJSON_AddNumberToObject(env, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
  cJSON_AddStringToObject(env, "mpi", mpiver);
  cJSON_AddStringToObject(env, "blas_core", cli_blas_core());
  cJSON *o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, "env", env);
  cli_print_json(f, o);
}

int cli_tables_arg(const char *verb, const char *arg, char *buf, size_t n, double *scale,
                   int *has_scale) {
  *has_scale = 0;
  if (arg[0] == '\0') {
    cli_error(verb, "--tables: the name is empty (kaggle, terabyte, mlperf or a JSON file)");
    return -1;
  }
  if ((size_t)snprintf(buf, n, "%s", arg) >= n) {
    cli_error(verb, "--tables: the name '%.40s...' is too long", arg);
    return -1;
  }
  if (access(arg, F_OK) == 0) return 0; /* a file, ':' in its path or not */
  char *colon = strrchr(buf, ':');
  if (colon == NULL || colon == buf) return 0;
  double v;
  /* Not a number: part of the name (the loader says it is no preset nor file). */
  if (cli_parse_double(colon + 1, -INFINITY, INFINITY, &v)) return 0;
  if (!(v > 0) || v > 1) {
    cli_error(verb, "--tables %s: the scale %s must be above 0 and at most 1", arg, colon + 1);
    return -1;
  }
  *colon = '\0';
  *scale = v;
  *has_scale = 1;
  return 0;
}

int cli_lookup_arg(const char *verb, const char *arg, gs_cost_lookup *out) {
  double v[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int k = 0, ok = 1;
  char *end = NULL;
  while (k < 10 && ok) {
    const char *at = k == 0 ? arg : end + 1;
    v[k] = strtod(at, &end);
    ok = end != at;
    k++;
    if (*end != ',') break;
  }
  gs_cost_lookup lk = {.alpha = v[0], .beta = v[1], .gamma = v[2], .alpha_hit = v[3],
                       .beta_hit = v[4], .cache_bytes = v[5], .gamma_mixed = v[6],
                       .alpha_row = v[7], .beta_row = v[8], .gamma_hit = v[9]};
  int shape = ok && *end == '\0' && (k == 2 || k == 3 || k == 7 || k == 10);
  if (!shape || gs_cost_lookup_check(&lk) != GS_OK) {
    /* the figure out of range named (each time under 1 ms) */
    char why[200] = "";
    if (shape) snprintf(why, sizeof why, ": %s", gs_last_error());
    cli_error(verb, "--lookup '%s': expected A,B[,G[,AH,BH,C,GM[,AR,BR,GH]]], seconds "
              "per lookup, per byte of row and per bag, a lookup's and a byte's in the "
              "cache, the cache's bytes, a bag's among half empty ones, a distinct "
              "row's update, a byte's of it and a bag's in the cache (numbers >= 0, each "
              "time below 1e-3 s)%s", arg, why);
    return -1;
  }
  *out = lk;
  return 0;
}

const cli_lookup_key cli_lookup_keys[CLI_LOOKUP_NKEYS] = {
    {"lookup_alpha_s", offsetof(gs_cost_lookup, alpha), "%.4g"},
    {"lookup_beta_s_per_B", offsetof(gs_cost_lookup, beta), "%.4g"},
    {"lookup_gamma_s_per_bag", offsetof(gs_cost_lookup, gamma), "%.4g"},
    {"lookup_hit_alpha_s", offsetof(gs_cost_lookup, alpha_hit), "%.4g"},
    {"lookup_hit_beta_s_per_B", offsetof(gs_cost_lookup, beta_hit), "%.4g"},
    {"cache_bytes", offsetof(gs_cost_lookup, cache_bytes), "%.0f"},
    {"lookup_gamma_mixed_s_per_bag", offsetof(gs_cost_lookup, gamma_mixed), "%.4g"},
    {"lookup_row_alpha_s", offsetof(gs_cost_lookup, alpha_row), "%.4g"},
    {"lookup_row_beta_s_per_B", offsetof(gs_cost_lookup, beta_row), "%.4g"},
    {"lookup_gamma_hit_s_per_bag", offsetof(gs_cost_lookup, gamma_hit), "%.4g"},
};

void cli_lookup_print(const char *prefix, const gs_cost_lookup *lk, const char *from) {
  printf("%slookup cost: %.3g ns + %.3g ns per byte of row, %.3g ns per bag a shard walks "
         "(%s)\n", prefix, lk->alpha * 1e9, lk->beta * 1e9, lk->gamma * 1e9, from);
}

int cli_tables_load(const char *verb, const char *name, double scale, double pooling,
                    gs_embed_spec **t, int *n) {
  *t = NULL;
  *n = 0;
  if (strcmp(name, "kaggle") == 0 || strcmp(name, "terabyte") == 0 ||
      strcmp(name, "mlperf") == 0) {
    *t = gs_calloc(32, sizeof **t);
    if (*t == NULL) {
      cli_fail(verb, "out of memory");
      return 1;
    }
    if (gs_embed_preset(name, scale, *t, 32, n) != GS_OK) {
      cli_error(verb, "--tables: %s", gs_last_error());
      gs_embed_specs_free(*t);
      *t = NULL;
      return 2;
    }
    for (int i = 0; i < *n; i++) (*t)[i].pooling = pooling;
    return 0;
  }
  gs_status st = gs_embed_specs_load_scaled(name, scale, pooling, t, n);
  if (st != GS_OK) {
    cli_error(verb, "--tables: %s%s", st == GS_ERR_IO ? "no such preset (kaggle, terabyte, "
              "mlperf), and " : "", gs_last_error());
    return st == GS_ERR_NOMEM ? 1 : 2;
  }
  return 0;
}

int cli_check_train_args(char *const *args, int nargs, char *msg, size_t len) {
  msg[0] = '\0';
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 0; /* cannot check: the run will */
  self[n] = '\0';
  char **v = calloc((size_t)nargs + 3, sizeof *v);
  if (!v) return 0;
  v[0] = self;
  v[1] = "train";
  for (int i = 0; i < nargs; i++) v[i + 2] = args[i];
  int p[2];
  if (pipe(p) != 0) {
    free(v);
    return 0;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    dup2(p[1], 2);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1);
    setenv("GRADSYNC_CHECK_ARGS", "1", 1);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    execv(self, v);
    _exit(127);
  }
  free(v);
  close(p[1]);
  size_t got = 0;
  for (;;) {
    ssize_t k = read(p[0], msg + got, len - 1 - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    got += (size_t)k;
    if (got == len - 1) break;
  }
  msg[got] = '\0';
  close(p[0]);
  if (pid < 0) return 0;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  /* "gradsync train: WHY (see --help)": WHY, for the caller to say. */
  msg[strcspn(msg, "\n")] = '\0';
  const char *pre = "gradsync train: ";
  size_t lp = strlen(pre);
  if (strncmp(msg, pre, lp) == 0) memmove(msg, msg + lp, strlen(msg) - lp + 1);
  size_t m = strlen(msg), h = strlen(" (see --help)");
  if (m >= h && strcmp(msg + m - h, " (see --help)") == 0) msg[m - h] = '\0';
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
