/* The gradsync command line: one binary, git-style verbs, and the toolkit
 * they share (number parsing, the median, JSON, the ranks' set-up and their
 * agreement on failures). The verbs use only gradsync's public headers. */
#ifndef GRADSYNC_CLI_H
#define GRADSYNC_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "gradsync.h"

int cmd_bench(int argc, char **argv);
/* gradsync bench --op topk (apps/bench_topk.c), reached through cmd_bench. */
int cmd_bench_topk(int argc, char **argv);
/* gradsync bench --op sparse_allreduce (apps/bench_sparse.c). */
int cmd_bench_sparse(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_train_dlrm(int argc, char **argv); /* --model dlrm */
int cmd_syncswitch(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_shard(int argc, char **argv);
/* gradsync cluster (apps/cmd_cluster.c): `cluster simulate` to the cluster
 * simulator, every other `cluster` command to gs_cmd_cluster_manager
 * (apps/cmd_cluster_mgr.c: serve, keep, drain, undrain, down). */
int cmd_cluster(int argc, char **argv);
int gs_cmd_cluster_manager(int argc, char **argv);
/* The cluster manager's clients (apps/cmd_cluster_mgr.c). */
int cmd_submit(int argc, char **argv);
int cmd_jobs(int argc, char **argv);
int cmd_cancel(int argc, char **argv);

/* ---- Numbers ------------------------------------------------------------
 * Every verb reads its numbers with these. Each returns 0 on success and -1
 * (leaving *out unchanged) on an empty string, stray characters (spaces,
 * a '+', a trailing unit that is not one), a leading zero ("010", which C
 * would read as octal, "0x10"), an overflow or a value outside [min, max].
 * Numbers are decimal only. */

/* Parses "4K", "256MB", "1GiB", "4096" into bytes (K/M/G are powers of
 * 1024, as nccl-tests reads them). 0, -1 not a size, -2 too large. */
int cli_parse_bytes(const char *s, size_t *out);
/* A decimal integer in [min, max]. */
int cli_parse_long(const char *s, long min, long max, long *out);
int cli_parse_int(const char *s, int min, int max, int *out);
/* A finite decimal number in [min, max] ("0.5", ".5", "1e-3"; not "nan",
 * "inf" nor strtod's hexadecimal "0x1p3"). */
int cli_parse_double(const char *s, double min, double max, double *out);
/* "5s", "0.5s": seconds in [min, max] as cli_parse_double reads the number
 * (--commit-every's by-time form). 0 and *out set; 1 without the "s" (the
 * caller reads another form); -1 a bad number. */
int cli_parse_seconds_suffix(const char *s, double min, double max, double *out);
/* cli_parse_double for a value kept as a float: a number other than 0 that
 * a float cannot hold apart from 0 (below FLT_MIN, e.g. "1e-50") is
 * refused too, where it would have become 0 (which options often read as
 * "the default" or "off"). */
int cli_parse_float(const char *s, double min, double max, float *out);

/* An embedding table set's argument, PRESET[:SCALE] or FILE[:SCALE] (train
 * and shard's --tables): the argument whole when it names a file that
 * exists, else a trailing ":NUMBER" is the scale (0 < SCALE <= 1) and the
 * rest the preset or file. Writes the name into buf (n bytes) and the
 * scale into *scale when there is one (*has_scale 1). 0, or -1 after
 * printing why (a scale out of range, a name too long). */
int cli_tables_arg(const char *verb, const char *arg, char *buf, size_t n, double *scale,
                   int *has_scale);
/* A lookup cost's argument, A,B[,G[,AH,BH,C,GM[,AR,BR,GH]]] (shard's and
 * train --model dlrm's --lookup): 2, 3, 7 or 10 numbers, gs_cost_lookup's
 * fields in order (the rest 0), each finite and >= 0
 * (gs_cost_lookup_check). 0, or -1 after printing why. */
int cli_lookup_arg(const char *verb, const char *arg, gs_cost_lookup *out);
/* The lookup cost's first figures as one line ("PREFIXlookup cost: 40 ns +
 * 0.4 ns per byte of row, 0 ns per bag a shard walks (FROM)") on stdout:
 * shard's and train --model dlrm's. */
void cli_lookup_print(const char *prefix, const gs_cost_lookup *lk, const char *from);
/* A lookup cost's figures under gradsync shard's JSON keys, in --lookup's
 * order of them (the cache's bytes "%.0f", the rest "%.4g"): shard's
 * output and train --model dlrm's epoch lines. */
typedef struct cli_lookup_key {
  const char *key;
  size_t offset; /* of the double in gs_cost_lookup */
  const char *fmt;
} cli_lookup_key;
enum { CLI_LOOKUP_NKEYS = 10 };
extern const cli_lookup_key cli_lookup_keys[CLI_LOOKUP_NKEYS];
/* The tables of a set named as cli_tables_arg leaves it: a preset's, or a
 * file's (gs_embed_specs_load_scaled), rows times `scale`, `pooling` ids
 * per sample for every preset table and every file table that gives none.
 * *t is freed with gs_embed_specs_free either way. 0, or the exit status
 * after printing why (2: no such preset or file, a bad file). */
int cli_tables_load(const char *verb, const char *name, double scale, double pooling,
                    gs_embed_spec **t, int *n);

/* The value of option NAME ("--ps") among another program's arguments
 * argv[0..argc), as "--ps V" or "--ps=V", up to a "--"; the last one wins,
 * as getopt's. NULL when it is not given. For one of gradsync train's long
 * options (its DLRM trainer's with --model dlrm) the arguments are read as
 * train's getopt_long reads them: an unambiguous prefix ("--global-b 48")
 * counts, and another option's value is skipped. */
const char *cli_option_value(char *const *argv, int argc, const char *name);
/* gradsync train's long options and its DLRM trainer's (getopt_long's
 * tables, {0} ended): train parses with them, cli_option_value reads a
 * train command line by them. */
extern const struct option cli_train_longs[];
extern const struct option cli_train_dlrm_longs[];
/* Whether option NAME is given among argv[0..argc), read as
 * cli_option_value reads them (with or without a value: "--resume",
 * "--res=auto"). */
int cli_option_given(char *const *argv, int argc, const char *name);

/* A DLRM training job's fixed world size: the ranks its --plan FILE was
 * made for, when argv[0..argc) (gradsync train's options) hold --model
 * dlrm and --plan; 0 when they do not; -1 with why when the plan cannot be
 * read. (A plan places shards on ranks: the job runs on those only.) */
/* Whether option NAME's value (cli_option_value) is VALUE. */
int cli_option_is(char *const *argv, int argc, const char *name, const char *value);

int cli_dlrm_plan_ranks(char *const *argv, int argc, char *why, size_t why_len);

/* The median of v[0..n) (0 for n == 0); sorts v in place. */
double cli_median(double *v, size_t n);

/* CPU time in seconds, user and system, on clock `which`:
 * CLOCK_PROCESS_CPUTIME_ID (every thread) or CLOCK_THREAD_CPUTIME_ID. */
double cli_cpu_seconds(clockid_t which);

/* ---- Messages and JSON -------------------------------------------------
 * One voice for every verb. Every message is one line on stderr:
 *
 *   gradsync VERB: message (see --help)      bad usage or input, exit 2
 *   gradsync VERB: message                   a failure of the work, exit 1
 *   gradsync VERB: rank R: message           either, from rank R of several
 *
 * Whatever the message holds (names from a profile, a library error), it
 * is printed as valid UTF-8 on one line: see cli_clean_text. */

/* Bad usage or input (an unknown option, a bad value, a missing argument,
 * a file that cannot be read or written at start-up): the verb then exits
 * with status 2. Between cli_argv_errors(1) and (0), around a parse of
 * options (which the ranks of one launch mostly share), the first error
 * under a launcher is printed by its rank 0 at once and held by the others:
 * cli_rank_connect prints it where the ranks did not all say the same (an
 * MPMD launch), and a rank that exits before then prints it at exit. */
void cli_argv_errors(int on);
/* The held error's message (no verb, no "see --help"), or NULL. */
const char *cli_argv_error_message(void);
/* Prints the held error (print = 1) or drops it. */
void cli_argv_error_release(int print);
void cli_error(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A failure of the work itself (a collective failed, a result was wrong,
 * an output could not be written at the end): the verb exits with 1. */
void cli_fail(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The one formatter behind cli_error, cli_fail and cli_rank_error: rank < 0
 * prints no rank, usage != 0 adds "(see --help)". */
void cli_vmessage(const char *verb, int rank, int usage, const char *fmt, va_list ap);

/* gradsync run --node-cpus (run_cpu.c). run_cpu_create makes a CPU group
 * per node limited to `cpus` cores (cgroup v1 or v2), the groups' files
 * owned by uid/gid when uid >= 0, removes groups of dead launchers, and
 * writes the path prefix that a node number completes; 0 or -1 with a
 * message. run_cpu_enter moves the calling process into node `node`'s
 * group; run_cpu_destroy kills what is left in the groups of launcher
 * `pid` and removes them. */
int run_cpu_create(int pid, int nodes, double cpus, int uid, int gid, char *prefix,
                   size_t len);
int run_cpu_enter(const char *prefix, int node);
void run_cpu_destroy(int pid);
/* Removes the groups of launchers that died (killed before they could),
 * where this process may: every local launch calls it, with or without
 * --node-cpus. */
void run_cpu_clean_stale(int self);

/* gradsync run --hosts / --hostfile (run_hosts.c): the hosts of a launch
 * and their slots. run_hosts_parse reads "HOST[:SLOTS],..."; run_hosts_read
 * a hostfile of lines HOST, HOST slots=N or HOST:N with '#' comments. Both
 * return 0, or -1 after a message naming the entry or the line (a bad name
 * or slot count, a host given twice, an unreadable or empty file), with h
 * empty. run_hosts_mpi_list returns mpirun's --host value "h1:4,h2:4"
 * (malloc'ed, the caller frees it; NULL when out of memory). h owns its
 * array until run_hosts_free. */
#define RUN_HOST_NAME_MAX 253 /* a DNS name's length */
typedef struct run_host {
  char name[RUN_HOST_NAME_MAX + 1];
  int slots;
  int line; /* the hostfile's line; 0 for --hosts */
} run_host;
typedef struct run_hosts {
  run_host *host;
  int n, cap;
  long slots; /* their sum */
} run_hosts;
int run_hosts_parse(const char *list, run_hosts *h);
int run_hosts_read(const char *path, run_hosts *h);
/* run_hosts_read for another command: its messages name verb and option
 * opt ("cluster serve", "--nodes") instead of run's --hostfile. */
int run_hosts_read_as(const char *verb, const char *opt, const char *path, run_hosts *h);
/* A Slurm allocation's nodes: nodelist in Slurm's hostlist form
 * ("node[01-04,07],login1"), slots from tasks_per_node ("2(x3),1"; NULL or
 * "": 1 a node). var names where the list came from, for messages
 * (SLURM_JOB_NODELIST); verb is the command's. 0, or -1 after a message
 * naming the entry, with h empty. */
int run_hosts_slurm(const char *verb, const char *var, const char *nodelist,
                    const char *tasks_per_node, run_hosts *h);
char *run_hosts_mpi_list(const run_hosts *h);
void run_hosts_free(run_hosts *h);

/* gradsync run --elastic MIN:MAX (run_elastic.c; docs/ELASTIC.md): the
 * elastic supervisor of src/launch driven from run's options.
 * run_elastic_parse_spec reads "MIN:MAX" or "N" (1 <= MIN <= MAX <=
 * RUN_ELASTIC_MAX): 0 or -1. run_elastic supervises the job and returns the
 * exit status (0 done, 1 failed or ended, 2 bad input, 3 stopped on request,
 * 128+N interrupted); mpirun_argv (mpirun and its fixed options, without
 * -np and --host) and prog stay the caller's. */
#define RUN_ELASTIC_MAX 65536
struct gs_launch_host;
typedef struct run_elastic_opts {
  int min, max;
  int first;                         /* the first launch's size at most (0: max) */
  const struct gs_launch_host *hosts;
  int nhosts;
  int hosts_explicit;                /* --hosts/--hostfile: mpirun gets --host */
  const char *discover;              /* --discover SCRIPT */
  double discover_every;             /* --discover-every S */
  int max_restarts;                  /* --max-restarts K */
  double resize_interval;            /* --resize-interval S */
  int shrink_on_discover;            /* --shrink-on-discover */
  double min_wait;                   /* --min-wait S */
  const char *events;                /* --events FILE */
  const char *cost_cache;            /* --cost-cache DIR */
  const char *cost_cache_desc;       /* the launch's fixed settings (its key's part) */
  void (*hosts_ok)(const char *const *hosts, int n, int *ok, void *user);
  const char *net;                   /* --net NAME: the ranks run on emulated nodes */
  int per_node;                      /* --per-node K with --net */
} run_elastic_opts;
int run_elastic_parse_spec(const char *s, int *min, int *max);
int run_elastic(const run_elastic_opts *o, char **mpirun_argv, char **prog, int nprog);

/* Copies in to out (cap bytes, always terminated) as valid UTF-8 without
 * control characters: each byte of an invalid or overlong sequence, each
 * surrogate and each C0 or C1 control character (newline and tab included)
 * and DEL becomes U+FFFD. Text and JSON output use it alike, so a name reads
 * the same in both. A sequence that does not fit whole is dropped. Returns
 * out. */
char *cli_clean_text(char *out, size_t cap, const char *in);
/* A table's cell of width characters (code points, each taken as one
 * column) from text, cleaned (cli_clean_text): cut to width characters at
 * most (never inside one) and padded with spaces to width; printf's
 * "%-14.14s" counts bytes, and cuts and pads a name in another script
 * wrongly. Returns out. */
char *cli_cell(char *out, size_t cap, const char *text, int width);
/* "14.50s": seconds to three significant digits or more, for tables (a
 * time-compressed trace's jobs last seconds: whole seconds read 31 for
 * 30.6). Returns buf. */
const char *cli_secs(char *buf, size_t len, double s);
/* The characters (code points) of valid UTF-8 text. */
int cli_text_width(const char *s);
/* Cleans a profile's model and tensor names in place (cli_clean_text), so
 * that every output made from them (tables, JSON lines, timelines, error
 * messages) is valid UTF-8: profiles are read as given, names included.
 * GS_ERR_NOMEM, with the profile unchanged from that name on, otherwise
 * GS_OK. */
struct gs_profile;
gs_status cli_clean_profile(struct gs_profile *p);

/* Bytes of the profile's whole gradient: what one iteration's messages
 * carry (the sum of gs_profile_tensor_bytes). */
double cli_profile_bytes(const struct gs_profile *p);

/* getopt_long's errors, reported in the verb's voice. Call with the value
 * getopt_long returned (':' for a missing value, '?' otherwise), with the
 * optstring starting with "+:" (no reordering, missing values reported as
 * ':'), and the verb's long options. Prints "option '--x' needs a value",
 * "option '--x' takes no value", "option '--x' is ambiguous: --xa, --xb"
 * (a prefix of several of longs) or "unknown option '--x'" and returns 2. */
struct option;
int cli_getopt_error(const char *verb, int c, char *const *argv, const struct option *longs);

/* Repeated options are refused, as strict tools do (a value given twice is
 * more often a mistake in a script than a wish for the last one). seen is
 * the verb's record (zeroed), indexed by getopt's value c for the option,
 * whose name is looked up in longs; returns 0 the first time, else prints
 * "option --NAME given more than once" and returns 2. */
struct option;
typedef struct cli_seen {
  unsigned char seen[256];
} cli_seen;
int cli_once(const char *verb, cli_seen *s, int c, const struct option *longs);

/* Prints a cJSON object as one line on f and frees it. */
struct cJSON;
void cli_print_json(FILE *f, struct cJSON *obj);
/* Adds number v to obj as fmt (a printf format such as "%.3f" or "%.4g")
 * would round it: records keep the precision they had when written with
 * printf. A NaN or an infinity becomes null, as JSON has neither. */
void cli_json_add(struct cJSON *obj, const char *name, double v, const char *fmt);
/* ---- What `gradsync train` shows (train_view.c) ----------------------------
 * The training library's events as text (a progress bar on a terminal, log
 * lines otherwise) or JSON lines (json = 1), and the flags that name its
 * options in messages. The view outlives the run. */
struct gs_train_events;
typedef struct cli_train_view {
  int json;
  int terminal;     /* set by cli_train_events */
  double last_draw; /* when the bar was last drawn */
  int bar_open;     /* a terminal's bar is drawn without its newline yet */
  int epoch_seen;   /* an epoch's evaluation has been shown */
} cli_train_view;
void cli_train_events(cli_train_view *v, struct gs_train_events *e);

/* Writes a one-line JSON description of the machine and software to f. */
void cli_print_env_json(FILE *f);

/* ---- OpenBLAS's kernels (cli_blas.c) ---------------------------------------
 * cli_blas_check, first in main: when OpenBLAS chose kernels narrower than
 * the CPU's vector unit and OPENBLAS_CORETYPE is unset, sets it and executes
 * the program again (returns only when nothing was to be done, or the exec
 * failed, with a warning). cli_blas_core: the kernels in use (OpenBLAS's
 * name). */
void cli_blas_check(char **argv);
const char *cli_blas_core(void);

/* ---- Ranks ----------------------------------------------------------------
 * The set-up every multi-rank verb shares, and agreement points: where a
 * rank can fail alone before a collective phase (bad options on one node, a
 * missing file, an allocation), every rank first learns every rank's
 * outcome, and all stop together instead of some waiting forever in a
 * collective that the others never reach.
 *
 * MPI and threads. A verb calls MPI itself only inside cli_rank_init, before
 * gs_comm_create starts the communicator's progress thread. Afterwards every
 * collective of the verb's own (agreements, broadcasting the initial
 * weights, summing metrics) is one of gradsync's collectives on the
 * gs_comm, which the progress thread makes: the verbs then need no more
 * than the thread level gs_comm_create itself needs (MPI_THREAD_SERIALIZED),
 * where calling MPI from the main thread while the progress thread is inside
 * MPI would need MPI_THREAD_MULTIPLE. Those collectives share the gs_comm
 * with the engine's, so a verb issues them only where the engine has no
 * collective in flight on any rank (before the first iteration, after
 * gs_engine_wait and every gs_engine_wait_tensor of the step, or after
 * gs_engine_destroy): then every rank issues the same sequence. A failure
 * while the engine may have collectives in flight cannot be agreed on (the
 * others are inside the engine's collectives); cli_rank_abort ends the job
 * there. */

typedef struct cli_rank {
  const char *verb;
  gs_comm *comm;  /* NULL until cli_rank_init succeeds */
  int rank, size;
} cli_rank;

enum {
  /* One OpenBLAS thread per rank (GRADSYNC_BLAS_THREADS overrides). */
  CLI_RANK_BLAS = 1,
};

/* Whether this process was started by an MPI launcher (mpirun sets
 * OMPI_COMM_WORLD_SIZE, other launchers PMI_SIZE or PMIX_RANK). A verb run
 * directly whose options are bad exits at once: there are no other ranks
 * to tell, and starting MPI alone costs seconds on a loaded machine. */
int cli_under_launcher(void);
/* 1 when the user watches a terminal: GRADSYNC_TTY under `gradsync run`
 * (ranks write to mpirun's pseudo-terminal even into a file), else
 * isatty(stdout). */
int cli_on_terminal(void);
/* Finds an executable as execvp would (PATH, a name with '/' as it is), and
 * also in /usr/sbin and /sbin, which a non-login PATH may lack: 0 with its
 * path in out, or -1. A regular file with execute permission whose "#!"
 * interpreter, if any, is one too. cli_find_exe_why also says why not, in
 * why (n bytes): "is a directory", "its interpreter ... No such file ...". */
int cli_find_exe(const char *name, char *out, size_t size);
/* Whether the directory DIR that option OPT names can be written, or made
 * and written (its parent a writable directory), without making it: 0, or
 * 2 after saying why (`gradsync VERB: OPT DIR: ...`). As access() tells: a
 * run still probes by writing (root passes access() on /proc). */
/* Rank 0 of a run that starts afresh (no --resume) with --checkpoint DIR:
 * a warning when DIR holds a commit of the kind the run makes already (a
 * vision run's checkpoint.json; dlrm 1: a DLRM run's dlrm.json), naming it:
 * this run's first commit replaces it, and --resume would have continued
 * it (until 2026-12-06 it was replaced without a word). */
void cli_warn_checkpoint_replaced(const char *verb, const char *dir, int dlrm);
int cli_check_out_dir(const char *verb, const char *opt, const char *dir);
/* Runs `gradsync train ARGS` (this binary) with GRADSYNC_CHECK_ARGS=1: the
 * trainer's own checks of its options, nothing run. Its exit status (2 for
 * options it refuses; 0 also where it cannot be run: the run checks again),
 * its message's first line in msg, without "gradsync train: " and
 * "(see --help)", for the caller to say in its own voice. */
int cli_check_train_args(char *const *args, int nargs, char *msg, size_t len);
int cli_find_exe_why(const char *name, char *out, size_t size, char *why, size_t n);

/* Starts MPI (gs_init) and learns the rank and size: cli_rank_error names
 * the rank from here on. Returns 0, or 1 after printing why not. */
int cli_rank_init(cli_rank *r, const char *verb, int *argc, char ***argv);

/* The first agreement, then the communicator: every rank says how what it
 * did alone went (startup_rc: 0, or the non-zero exit status of a failure
 * this rank has already reported, such as bad options or an unreadable
 * input file; startup_reason: its short form for the others); if all went
 * well, the communicator over MPI_COMM_WORLD is created and the BLAS threads
 * set (flags). Returns 0 when every rank is ready. Otherwise MPI is shut
 * down again and the status to exit with is returned: startup_rc on a rank
 * that failed, 1 on the others (which print "gradsync VERB: rank R:
 * stopping: rank K failed (reason)"). */
int cli_rank_connect(cli_rank *r, int flags, int startup_rc, const char *startup_reason);

/* Agreement point (collective over the ranks): returns 0 if no rank failed,
 * else 1 on every rank. A failed rank (failed != 0) has already printed its
 * error; reason is its short form for the others, who print which ranks
 * failed and the first one's reason. Call only where the engine has no
 * collective in flight (see above). If the agreement's own collective fails
 * (a collective failed inside the communicator before), no collective can
 * reach the others: the job is aborted (cli_rank_abort). */
int cli_agree(cli_rank *r, int failed, const char *reason);
/* cli_agree for a gs_status, whose message (gs_last_error()) it prints:
 * once, by rank 0 and ending "(on every rank)", when every rank failed with
 * the same status and message; else "gradsync VERB: rank R: <message>" by
 * each rank that failed (gs_train_agree_status). */
int cli_agree_status(cli_rank *r, gs_status st);
/* --compress's value: '' is refused (the library reads it as no
 * compression, which the user did not ask for by naming the option); says
 * so and returns -1, else 0. */
int cli_compress_arg(const char *verb, const char *arg);
/* --net NAME of a run that builds links (run, syncswitch): a rate or an
 * alias of gs_net_rate, not shm (plan's and simulate's name for one
 * machine's memory). Sets *bps; says what is wrong and returns -1, else 0. */
int cli_link_net_arg(const char *verb, const char *name, double *bps);
/* --policy A,B,... (replay, simulate): the policies in turn, as `all` runs
 * every one; a "first=" item belongs to the bucket spec before it
 * ("bucket:25,first=1"). The items are copied into buf (n bytes) and
 * listed[0 .. *count) point into it, at most max of them; each must parse.
 * Says what is wrong and returns -1, else 0. */
#define CLI_MAX_POLICIES 16
int cli_policy_list(const char *verb, const char *policy, char *buf, size_t n,
                    const char **listed, size_t max, size_t *count);
/* --coding-rate NS (plan, simulate): the compressors' coding time in ns per
 * element, encode and decode, from 0 to 1e6, instead of a measurement on
 * this machine (which differs from run to run). Sets *ns; says what is
 * wrong and returns -1, else 0. */
int cli_coding_rate_arg(const char *verb, const char *arg, double *ns);
/* The coding time of zc (gs_cost_coding): coding_ns >= 0 (--coding-rate)
 * is one rate at every size; < 0 measures it on this machine, `tries`
 * times keeping the fastest at each size (a measurement on a shared host is
 * only ever slowed), at the sizes of prof's messages: its f32 tensors,
 * output side first, each its own segment, as the engine sends them
 * (gs_compress_measure_coding). */
gs_status cli_coding(gs_compressor *zc, double coding_ns, const gs_profile *prof, int tries,
                     gs_cost_coding *out);
/* The rate a coding time gives at its largest measured size, ns per
 * element: what the verbs print. */
double cli_coding_ns(const gs_cost_coding *m);
/* cli_agree_status, telling how the ranks failed (gs_train_agree_outcome):
 * 2 when every rank failed alike with bad input, its line ending
 * "(see --help)"; 1 otherwise; 0 when none failed. */
int cli_agree_outcome(cli_rank *r, gs_status st);

/* Agreement on values that must be equal on every rank (a step count, a
 * parameter count, ...): returns 0 if every rank's vals[i] equals rank 0's,
 * else 1 on every rank, each printing the first difference (the setting's
 * name, the ranks and their values). */
int cli_agree_equal(cli_rank *r, const int64_t *vals, const char *const *names, int n);

/* Ends the job from any thread when the others cannot be told through a
 * collective (the engine may have collectives in flight): prints
 * "gradsync: rank R: fatal: VERB: message" and aborts every rank. */
_Noreturn void cli_rank_abort(cli_rank *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "gradsync VERB: rank R: message" (no rank prefix with one rank
 * whose communicator does not exist yet). */
void cli_rank_error(const cli_rank *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* cli_rank_error for bad usage or input found by a rank at start-up (a
 * profile it cannot read, a path it cannot write): adds "(see --help)". */
void cli_rank_usage_error(const cli_rank *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Agrees on rc (0 or an exit status) across the ranks, then destroys the
 * communicator and shuts MPI down. Returns rc, or 1 where rc was 0 but
 * another rank failed. */
int cli_rank_finish(cli_rank *r, int rc);

/* Whether a file can be written at path, probed before any work: an
 * existing file is opened for writing (not truncated); a new one is created
 * and removed again. GS_ERR_IO naming the path, what it is for and why
 * otherwise (a missing directory, a directory in the way, no permission, a
 * read-only file system). */
gs_status cli_check_writable(const char *path, const char *what);

#endif /* GRADSYNC_CLI_H */
